package flyaffinity

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestParseMachines(t *testing.T) {
	cases := []struct {
		name    string
		values  []string
		want    []string
		skipped int
	}{
		{"fly example", []string{"148e21dad76789 sea,4d89699c030518 ams"}, []string{"148e21dad76789", "4d89699c030518"}, 0},
		{"spaces and trailing comma", []string{" 148e21dad76789  sea , 4d89699c030518 ams ,"}, []string{"148e21dad76789", "4d89699c030518"}, 0},
		{"several records", []string{"a1 sea", "b2 ams"}, []string{"a1", "b2"}, 0},
		{"missing region", []string{"a1,b2 ams"}, []string{"b2"}, 1},
		{"three tokens", []string{"a1 sea extra,b2 ams"}, []string{"b2"}, 1},
		{"bad characters", []string{"a_1 sea,b2 am$,c3 fra"}, []string{"c3"}, 2},
		{"too long id", []string{strings.Repeat("a", 65) + " sea,b2 ams"}, []string{"b2"}, 1},
		{"nothing usable", []string{"garbage"}, nil, 1},
		{"empty", []string{""}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, skipped := parseMachines(c.values)
			if !slices.Equal(got, c.want) || skipped != c.skipped {
				t.Fatalf("parseMachines(%q) = %q, %d skipped; want %q, %d", c.values, got, skipped, c.want, c.skipped)
			}
		})
	}
}

// A TXT value split into several character strings (Fly splits at 255 bytes,
// possibly inside an entry) is joined before parsing.
func TestTXTSplitIntoSeveralStrings(t *testing.T) {
	ids := machineIDs(40) // about 760 bytes: needs several 255-byte strings
	parts := splitTXT(txtValue(ids...))
	if len(parts) < 3 {
		t.Fatalf("test value split into %d strings, want at least 3", len(parts))
	}
	f := startDNS(t, "")
	f.setRecords(parts)
	r := newTestResolver(t, testConfig(f, ids[0]))
	peers := peersOf(t, r)
	if len(peers) != len(ids)-1 {
		t.Fatalf("got %d peers from a split TXT value, want %d: %q", len(peers), len(ids)-1, peers)
	}
}

// Malformed entries in the DNS answer are skipped and counted; the rest is
// used.
func TestMalformedEntriesSkipped(t *testing.T) {
	f := startDNS(t, "aaa sea,bogus,bbb ams,ccc fr@,ddd fra extra")
	reg := prometheus.NewRegistry()
	cfg := testConfig(f, "aaa")
	cfg.Metrics = reg
	r := newTestResolver(t, cfg)
	peers := peersOf(t, r)
	want := []string{"http://bbb.vm.purr-relay.internal:8080"}
	if !slices.Equal(peers, want) {
		t.Fatalf("peers = %q, want %q", peers, want)
	}
	if got := counter(t, reg, "purrfly_flyaffinity_skipped_entries_total", "", ""); got != 3 {
		t.Fatalf("skipped entries counter = %v, want 3", got)
	}
}

// An answer too large for UDP comes back truncated and is fetched again over
// TCP.
func TestTruncatedAnswerRetriedOverTCP(t *testing.T) {
	ids := machineIDs(300) // about 5,700 bytes, over the 4,096-byte EDNS0 size
	f := startDNS(t, txtValue(ids...))
	r := newTestResolver(t, testConfig(f, ids[7]))
	if got := len(peersOf(t, r)); got != 299 {
		t.Fatalf("got %d peers, want 299", got)
	}
	if q := f.queries.Load(); q != 2 {
		t.Fatalf("DNS saw %d queries, want 2 (UDP truncated, then TCP)", q)
	}
}

// Peers lists the other machines as bracket-free hostnames on PeerPort, in id
// order, and the caller may keep the slice.
func TestPeersURLs(t *testing.T) {
	f := startDNS(t, "ccc sea,aaa ams,bbb fra")
	cfg := testConfig(f, "bbb")
	cfg.PeerPort = 9090
	r := newTestResolver(t, cfg)
	peers := peersOf(t, r)
	want := []string{"http://aaa.vm.purr-relay.internal:9090", "http://ccc.vm.purr-relay.internal:9090"}
	if !slices.Equal(peers, want) {
		t.Fatalf("peers = %q, want %q", peers, want)
	}
	peers[0] = "mutated"
	if again := peersOf(t, r); !slices.Equal(again, want) {
		t.Fatalf("mutating the returned slice changed the set: %q", again)
	}
}

// Off Fly (no app) there is no lookup and no peer.
func TestOffFlyNoLookup(t *testing.T) {
	f := startDNS(t, "aaa sea,bbb ams")
	cfg := testConfig(f, "")
	cfg.App = ""
	r := newTestResolver(t, cfg)
	if peers := peersOf(t, r); len(peers) != 0 {
		t.Fatalf("peers off Fly = %q, want none", peers)
	}
	if q := f.queries.Load(); q != 0 {
		t.Fatalf("DNS saw %d queries off Fly, want 0", q)
	}
}

func TestDefaults(t *testing.T) {
	r := New("app", "self", 0)
	defer r.Close()
	if r.cfg.TTL != DefaultTTL || r.cfg.DNSServer != "[fdaa::3]:53" || r.cfg.PeerPort != 8080 ||
		r.cfg.LookupTimeout != DefaultLookupTimeout || r.cfg.RouteWait != DefaultRouteWait {
		t.Fatalf("defaults not applied: %+v", r.cfg)
	}
	// Two Resolvers may share one registry.
	reg := prometheus.NewRegistry()
	a := NewWithConfig(Config{App: "app", Self: "a", Metrics: reg})
	b := NewWithConfig(Config{App: "app", Self: "b", Metrics: reg})
	a.Close()
	b.Close()
}

// peersOf calls Peers with a deadline and fails the test on error.
func peersOf(tb testing.TB, r *Resolver) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	peers, err := r.Peers(ctx)
	if err != nil {
		tb.Fatalf("Peers: %v", err)
	}
	return peers
}
