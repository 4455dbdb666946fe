package relay

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// TestRoomsView: wire.PathRelayRooms needs the internal secret and lists
// every room with its phase, hosted only while the host is attached.
func TestRoomsView(t *testing.T) {
	s := startRelay(t, Options{})
	hostSecret, _ := mustAllocate(t, s, "view-b")
	mustAllocate(t, s, "view-a")
	h := join(t, s, "view-b", hostSecret)
	defer h.WS.CloseNow()

	req, _ := http.NewRequest(http.MethodGet, s.HTTPURL()+wire.PathRelayRooms, nil)
	if resp, _ := do(t, req); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the secret: %d, want 401", resp.StatusCode)
	}
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	resp, body := do(t, req)
	var rr wire.RelayRooms
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &rr) != nil {
		t.Fatalf("rooms: %d %s", resp.StatusCode, body)
	}
	if rr.BootID != s.BootID() || len(rr.Rooms) != 2 || rr.Truncated {
		t.Fatalf("rooms view = %+v", rr)
	}
	a, b := rr.Rooms[0], rr.Rooms[1]
	if a.Name != "view-a" || a.Hosted || b.Name != "view-b" || !b.Hosted || b.Phase != phase.Hosted.String() || b.Connections != 1 || b.Epoch == "" {
		t.Fatalf("rooms = %+v", rr.Rooms)
	}
}
