package relay

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestMetricsMethods: /metrics answers GET and HEAD, and refuses anything
// else with 405 JSON.
func TestMetricsMethods(t *testing.T) {
	s := startRelay(t, Options{})
	for method, want := range map[string]int{http.MethodGet: 200, http.MethodHead: 200, http.MethodPost: 405, http.MethodDelete: 405} {
		req, _ := http.NewRequest(method, s.HTTPURL()+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s /metrics: %d, want %d", method, resp.StatusCode, want)
		}
	}
}

// TestRoomsListMethods: the internal room list answers GET and HEAD with
// the internal credential, and refuses other methods with 405.
func TestRoomsListMethods(t *testing.T) {
	s := startRelay(t, Options{})
	for method, want := range map[string]int{http.MethodGet: 200, http.MethodHead: 200, http.MethodPost: 405} {
		req, _ := http.NewRequest(method, s.HTTPURL()+wire.PathRelayRooms, nil)
		wire.SetInternal(req.Header, testSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s %s: %d, want %d", method, wire.PathRelayRooms, resp.StatusCode, want)
		}
	}
}

// TestHandoverRequestBounds: a handover request may name a room and an
// asker's boot of up to wire.MaxSessionIDLen bytes each; one byte more is
// a bad request.
func TestHandoverRequestBounds(t *testing.T) {
	m := newMeshRoom(t)
	ask := func(name, boot string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(wire.HandoverRequest{Name: name, BootID: boot, Secret: "x"})
		req, _ := http.NewRequest(http.MethodPost, m.holder.HTTPURL()+wire.PathHandover, bytes.NewReader(body))
		wire.SetInternal(req.Header, testSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e wire.Error
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Code
	}
	long := strings.Repeat("n", wire.MaxSessionIDLen)
	for _, tc := range []struct{ name, boot string }{{long, "asker"}, {"room", long}} {
		if st, code := ask(tc.name, tc.boot); code == wire.ErrBadRequest.Code {
			t.Errorf("name %d bytes, boot %d bytes: %d %s, want it considered", len(tc.name), len(tc.boot), st, code)
		}
	}
	for _, tc := range []struct{ name, boot string }{{long + "n", "asker"}, {"room", long + "n"}} {
		if st, code := ask(tc.name, tc.boot); st != http.StatusBadRequest || code != wire.ErrBadRequest.Code {
			t.Errorf("name %d bytes, boot %d bytes: %d %s, want 400 bad_request", len(tc.name), len(tc.boot), st, code)
		}
	}
}
