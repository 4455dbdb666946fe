package relay

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

func closeRoomAt(t *testing.T, s *Server, name, epoch, secret string) (int, wire.RelayRoomClosed) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL()+wire.PathRelayRoomClose, nil)
	req.Header.Set(wire.HeaderName, name)
	if epoch != "" {
		req.Header.Set(wire.HeaderRoomEpoch, epoch)
	}
	if secret != "" {
		req.Header.Set(wire.HeaderInternalSecret, secret)
	}
	resp, body := do(t, req)
	var out wire.RelayRoomClosed
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
	}
	return resp.StatusCode, out
}

// TestRoomClose: wire.PathRelayRoomClose needs the internal secret, closes
// every socket of the room with 1000 "room closed", frees the name at once
// (a new allocation id gets a new incarnation), and is idempotent; an
// epoch that is not the room's closes nothing.
func TestRoomClose(t *testing.T) {
	s := startRelay(t, Options{})
	hostSecret, clientSecret := mustAllocate(t, s, "close-me")
	host := join(t, s, "close-me", hostSecret)
	client := join(t, s, "close-me", clientSecret)
	host.ExpectToHost(wire.ToHostConnected)

	if st, _ := closeRoomAt(t, s, "close-me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("without the secret: %d, want 401", st)
	}
	if st, out := closeRoomAt(t, s, "close-me", "not-its-epoch", testSecret); st != http.StatusOK || out.Closed {
		t.Fatalf("another epoch: %d %+v, want 200 and nothing closed", st, out)
	}
	st, out := closeRoomAt(t, s, "close-me", "", testSecret)
	if st != http.StatusOK || !out.Closed || out.Connections != 2 || out.Epoch == "" || out.BootID != s.BootID() {
		t.Fatalf("close: %d %+v, want both sockets closed", st, out)
	}
	for _, p := range []*wstest.Peer{host, client} {
		if code := p.Closed(); code != websocket.StatusNormalClosure {
			t.Fatalf("close status %d, want 1000", code)
		}
	}
	if st, again := closeRoomAt(t, s, "close-me", "", testSecret); st != http.StatusOK || again.Closed {
		t.Fatalf("second close: %d %+v, want 200 closed=false", st, again)
	}
	a, st2, e := allocate(t, s, "close-me", "another-allocation")
	if st2 != http.StatusOK || a.Publication.Epoch == out.Epoch {
		t.Fatalf("reallocate after close: %d %v %+v, want a new incarnation", st2, e, a.Publication)
	}
	req, _ := http.NewRequest(http.MethodGet, s.HTTPURL()+wire.PathRelayRoomClose, nil)
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	if resp, _ := do(t, req); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d, want 405", resp.StatusCode)
	}
}
