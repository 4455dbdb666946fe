package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// TestBadAuth: malformed, unknown or oversized authentication messages get
// the one-byte reply 4 and a close (or, beyond the 65,535-byte frame
// limit, a close); a room next door keeps flowing throughout.
func TestBadAuth(t *testing.T) {
	s := startDev(t, nil, "eu")
	p := newPair(t, s.api, "eu", "neighbour")
	hostSecret := p.hostCap.Secret
	clientCap, _ := joinable(t, s.api, "neighbour")
	big := `{"roomName":"neighbour","clientSecret":"` + strings.Repeat("x", wire.MaxAuthSize) + `"}`
	for _, tc := range []struct {
		name string
		msg  []byte
		// mayCloseOnly: the relay may close without sending [4].
		mayCloseOnly bool
	}{
		{"not json", []byte("hello"), false},
		{"truncated json", []byte(`{"roomName":"neighbour",`), false},
		{"null", []byte("null"), false},
		{"array", []byte(`[1,2]`), false},
		{"wrong types", []byte(`{"roomName":1,"clientSecret":true}`), false},
		{"invalid utf-8", []byte{'{', 0xff, 0xfe, '}'}, false},
		{"empty message", []byte{}, false},
		{"no room", []byte(`{"clientSecret":"` + clientCap.Secret + `","nat":false}`), false},
		{"no secret", []byte(`{"roomName":"neighbour","nat":false}`), false},
		{"unknown room", client.AuthMessage("nowhere", clientCap.Secret, false), false},
		{"wrong secret", client.AuthMessage("neighbour", "not-the-secret", false), false},
		{"host secret for another room", client.AuthMessage("nowhere", hostSecret, false), false},
		{"second host", client.AuthMessage("neighbour", hostSecret, false), false},
		{"oversized json (5 KiB)", []byte(big), false},
		{"oversized frame (64 KiB + 1)", bytes.Repeat([]byte{'{'}, wire.MaxMessageSize+1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := client.DialRaw(tctx(t), s.relays[0].WSURL(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.CloseNow()
			if err := r.WriteBinary(tctx(t), tc.msg); err != nil {
				t.Fatal(err)
			}
			b, err := r.Read(tctx(t))
			switch {
			case err == nil && bytes.Equal(b, []byte{wire.AuthFailed}):
				st := expectClosed(t, func(ctx context.Context) error { _, err := r.Read(ctx); return err })
				if st != client.StatusPolicyViolation && st != -1 {
					t.Fatalf("closed with %d after [4], want 1008", st)
				}
			case err != nil && tc.mayCloseOnly:
			default:
				t.Fatalf("reply %v, %v; want [4] then a close", b, err)
			}
			roundTrip(t, p.host, p.cl, p.id, tc.name)
		})
	}
	// A connection that never authenticates is not answered (the relay
	// waits for its auth timeout); the neighbour is unaffected meanwhile.
	idle, err := client.DialRaw(tctx(t), s.relays[0].WSURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.CloseNow()
	roundTrip(t, p.host, p.cl, p.id, "idle-peer")
}

// TestBadHeaders: missing or oversized headers on /allocate_ws and /join get
// a JSON error with its code and a 4xx status; nothing is allocated.
func TestBadHeaders(t *testing.T) {
	s := startDev(t, nil, "eu")
	b := s.bal.URL()
	long := func(n int) string { return strings.Repeat("n", n) }
	id := client.NewAllocationID()
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		status             int
		code               string
	}{
		{"allocate without name", "POST", "/allocate_ws", map[string]string{"region": "eu", "allocation_id": id}, 400, "missing_header"},
		{"allocate with empty name", "POST", "/allocate_ws", map[string]string{"region": "eu", "name": "", "allocation_id": id}, 400, "missing_header"},
		{"allocate without allocation_id", "POST", "/allocate_ws", map[string]string{"region": "eu", "name": "r"}, 400, "missing_header"},
		{"allocate with long name", "POST", "/allocate_ws", map[string]string{"region": "eu", "name": long(wire.MaxSessionIDLen + 1), "allocation_id": id}, 400, "bad_header"},
		{"allocate with long region", "POST", "/allocate_ws", map[string]string{"region": long(wire.MaxRegionLen + 1), "name": "r", "allocation_id": id}, 400, "bad_header"},
		{"allocate with long allocation_id", "POST", "/allocate_ws", map[string]string{"region": "eu", "name": "r", "allocation_id": long(wire.MaxAllocationIDLen + 1)}, 400, "bad_header"},
		{"legacy allocate without name", "GET", "/allocate_ws", map[string]string{"region": "eu"}, 400, "missing_header"},
		{"legacy allocate with long name", "GET", "/allocate_ws", map[string]string{"region": "eu", "name": long(1000)}, 400, "bad_header"},
		{"join without name", "GET", "/join", nil, 400, "missing_header"},
		{"join with long name", "GET", "/join", map[string]string{"name": long(wire.MaxSessionIDLen + 1)}, 400, "bad_header"},
		{"internal route without secret", "POST", wire.PathRegister, nil, 401, "unauthorized"},
		{"internal route with a guessed secret", "POST", wire.PathPublish, map[string]string{wire.HeaderInternalSecret: testSecret + "x"}, 401, "unauthorized"},
		{"admin without secret", "GET", wire.PathInstances, nil, 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, tc.method, b+tc.path, tc.headers, nil)
			e := a.wireErr(t)
			if a.status != tc.status || e.Code != tc.code {
				t.Fatalf("%d %s, want %d %s", a.status, a.body, tc.status, tc.code)
			}
			if strings.HasPrefix(tc.path, "/v1/") {
				checkCacheHeaders(t, a, "") // no CORS on the admin API by default
				return
			}
			checkCommonHeaders(t, a)
		})
	}
	t.Run("header block over the server limit", func(t *testing.T) {
		a := do(t, "GET", b+"/join", map[string]string{"name": "r", "x-pad": long(wire.MaxHeaderBytes + 4096)}, nil)
		if a.status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", a.status)
		}
	})
	t.Run("relay internal allocation without secret", func(t *testing.T) {
		a := do(t, "POST", s.relays[0].HTTPURL()+wire.PathRelayAllocate, map[string]string{"name": "r", "allocation_id": id}, nil)
		if e := a.wireErr(t); a.status != 401 || e.Code != "unauthorized" {
			t.Fatalf("%d %s, want 401 unauthorized", a.status, a.body)
		}
	})
	t.Run("internal body over the limit", func(t *testing.T) {
		body := append([]byte(`{"bootId":"`), bytes.Repeat([]byte{'b'}, wire.MaxBodySize+1)...)
		a := internalPost(t, b, wire.PathPublish, append(body, `"}`...), nil)
		if e := a.wireErr(t); a.status != http.StatusRequestEntityTooLarge || e.Code != "body_too_large" {
			t.Fatalf("%d %s, want 413 body_too_large", a.status, a.body)
		}
	})
	if l, err := s.api.List(tctx(t), 0); err != nil || l.Total != 0 {
		t.Fatalf("/list after bad requests = %+v, %v; want no room", l, err)
	}
}

// TestBadSecretRefused: relay.New and balancer.New refuse a SECRET that is
// empty or not printable ASCII without spaces, and never echo it.
func TestBadSecretRefused(t *testing.T) {
	for _, secret := range []string{"with space", " leading", "tab\tinside", "nl\n", "", "caf\u00e9", strings.Repeat("s", wire.MaxSecretLen+1)} {
		_, rerr := relay.New(relay.Options{Secret: secret, ListenHost: "127.0.0.1", Logger: discard})
		_, berr := balancer.New(balancer.Options{Secret: secret, ListenHost: "127.0.0.1", Logger: discard})
		for name, err := range map[string]error{"relay": rerr, "balancer": berr} {
			if err == nil {
				t.Fatalf("%s.New accepted SECRET %q", name, secret)
			}
			if strings.TrimSpace(secret) != "" && strings.Contains(err.Error(), strings.TrimSpace(secret)) {
				t.Fatalf("%s.New error echoes the secret: %v", name, err)
			}
		}
	}
}
