package flyaffinity

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// attrOf returns attribute key of the first record whose message contains
// text.
func (l *logRecorder) attrOf(text, key string) (slog.Value, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if !strings.Contains(r.Message, text) {
			continue
		}
		var v slog.Value
		found := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v, found = a.Value, true
			}
			return !found
		})
		return v, found
	}
	return slog.Value{}, false
}

// loggedResolver is a resolver for self over f on a fake clock, its logs
// recorded.
func loggedResolver(t *testing.T, f *fakeDNS, self string) (*clock.Fake, *logRecorder, Config, *Resolver) {
	t.Helper()
	fake, logs := newFakeClock(), &logRecorder{}
	cfg := testConfig(f, self)
	cfg.Clock, cfg.Logger = fake, slog.New(logs)
	return fake, logs, cfg, newTestResolver(t, cfg)
}

// Rule: a clean DNS answer logs no "skipped malformed" warning; an answer
// with malformed entries logs one.
func TestSkippedEntriesWarnOnlyWhenSkipped(t *testing.T) {
	f := startDNS(t, "aaa sea,bbb ams")
	fake, logs, cfg, r := loggedResolver(t, f, "aaa")
	peersOf(t, r)
	if n := logs.count(slog.LevelWarn, "skipped malformed"); n != 0 {
		t.Fatalf("clean answer: %d skipped-entry warnings, want 0", n)
	}
	f.set("aaa sea,bogus,bbb ams")
	fake.Advance(cfg.TTL)
	peersOf(t, r)
	if n := logs.count(slog.LevelWarn, "skipped malformed"); n != 1 {
		t.Fatalf("answer with a malformed entry: %d skipped-entry warnings, want 1", n)
	}
}

// Rule: "lookups recovered" is logged once, by the first successful
// lookup after a failed one, never after a success.
func TestRecoveryLoggedOnlyAfterAFailure(t *testing.T) {
	f := startDNS(t, "aaa sea,bbb ams")
	fake, logs, cfg, r := loggedResolver(t, f, "aaa")
	const recovered = "lookups recovered"

	peersOf(t, r)
	fake.Advance(cfg.TTL)
	peersOf(t, r) // a success after a success
	if n := logs.count(slog.LevelInfo, recovered); n != 0 {
		t.Fatalf("%d recovery logs without a failure, want 0", n)
	}
	f.set("")
	fake.Advance(cfg.TTL)
	peersOf(t, r) // fails; the last good set serves
	f.set("aaa sea,bbb ams")
	fake.Advance(time.Second) // the retry interval
	peersOf(t, r)
	if n := logs.count(slog.LevelInfo, recovered); n != 1 {
		t.Fatalf("%d recovery logs after one failure, want 1", n)
	}
}

// Rule: the "machine set changed" log says whether DNS lists this machine
// (self_listed): false for a machine DNS does not list yet, true once it
// does.
func TestSetChangeLogSaysWhetherSelfIsListed(t *testing.T) {
	f := startDNS(t, "bbb ams")
	_, logs, _, r := loggedResolver(t, f, "aaa")
	peersOf(t, r)
	if v, ok := logs.attrOf("machine set changed", "self_listed"); !ok || v.Kind() != slog.KindBool || v.Bool() {
		t.Fatalf("self not listed: self_listed = %v (found %v), want false", v, ok)
	}

	logs2 := &logRecorder{}
	cfg2 := testConfig(f, "bbb")
	cfg2.Logger = slog.New(logs2)
	peersOf(t, newTestResolver(t, cfg2))
	if v, ok := logs2.attrOf("machine set changed", "self_listed"); !ok || v.Kind() != slog.KindBool || !v.Bool() {
		t.Fatalf("self listed: self_listed = %v (found %v), want true", v, ok)
	}
}
