package balancer

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// Admin keys of the /v1 tests: odd lengths (37 and 41), so that a log line
// carrying a key's length would show.
const (
	adminKeyA = "adm-key-a-QwErTyUiOpAsDfGhJkLzXcVbNmQ"
	adminKeyB = "adm-key-b-PlOkMiJnUhBgYtVfRcDeXsWzAqPlOkM"
)

// handleRoomClose is the fake relay's wire.PathRelayRoomClose: it drops
// the room (of that epoch, when one is named).
func (f *fakeRelay) handleRoomClose(w http.ResponseWriter, r *http.Request) {
	if err := wire.CheckInternal(r, testSecret); err != nil {
		wire.WriteError(w, err)
		return
	}
	name, epoch := r.Header.Get(wire.HeaderName), r.Header.Get(wire.HeaderRoomEpoch)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := wire.RelayRoomClosed{BootID: f.info.BootID}
	if rm := f.rooms[name]; rm != nil && (epoch == "" || rm.epoch == epoch) {
		out.Closed, out.Epoch, out.Connections = true, rm.epoch, rm.connections
		delete(f.rooms, name)
	}
	f.closeCalls++
	wire.WriteJSON(w, http.StatusOK, out)
}

// adminHarness is a harness whose balancer takes keys (nil: adminKeyA) and
// logs every level into the returned buffer.
func adminHarness(t testing.TB, keys []string, mod func(*Options)) (*harness, *testutil.Buffer) {
	t.Helper()
	if keys == nil {
		keys = []string{adminKeyA}
	}
	logs := &testutil.Buffer{}
	h := newHarness(t, func(o *Options) {
		o.AdminKeys = keys
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if mod != nil {
			mod(o)
		}
	})
	return h, logs
}

// admin is a client.Admin on h with key.
func (h *harness) admin(key string) *client.Admin {
	a := client.NewAdmin(h.s.URL(), key)
	a.HTTP = h.client
	return a
}

// bearer is the Authorization header of key.
func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

// wantErrBody checks a status and an error body of the one shape.
func wantErrBody(t testing.TB, st int, body []byte, status int, code string) {
	t.Helper()
	e := wire.DecodeError(st, body)
	if st != status || e.Code != code {
		t.Fatalf("got %d %s, want %d %s", st, body, status, code)
	}
	if strings.Contains(string(body), "goroutine") || strings.Contains(string(body), ".go:") {
		t.Fatalf("error body carries a trace: %s", body)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func textLogger(w *testutil.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func asWire(err error, out **wire.Error) bool { return errors.As(err, out) }
