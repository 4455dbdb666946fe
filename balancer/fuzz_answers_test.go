package balancer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// FuzzRelayAnswers feeds arbitrary relay answers (status and body) to the
// balancer's calls to a registered relay, through the real client code
// with an in-process transport: an allocation, the four migration calls
// (forwarded from the public routes) and the /ping proof. The client of
// the balancer always gets purrfly JSON and never a 500; a successful
// allocation is a capability PurrNet accepts on the registered host,
// whose room then answers /join with the relay's client credential; a
// migration answer is forwarded only when it is about the room and claim
// asked for (with a credential, ports and TLS mode for a claim), on the
// registered host; a ping proves a boot only from a 200 naming one; an
// operator's DELETE /v1/rooms/{name} answers closed only as the relay says.
func FuzzRelayAnswers(f *testing.F) {
	alloc, _ := json.Marshal(wire.RelayAllocation{
		Capability:  wire.Capability{Host: "x", Secret: "host-secret", Port: 443, UDPPortV2: 7778},
		Publication: wire.Publication{Name: "@room@", Epoch: "e1", Revision: 1, ClientSecret: "client-secret", AllocationID: "@alloc@"},
		BootID:      "relay-boot",
	})
	f.Add(uint8(0), 200, alloc)
	f.Add(uint8(0), 200, []byte(`{"capability":{"host":"x","secret":"s","port":0,"udpPortV2":1},"publication":{"name":"@room@"},"bootId":"relay-boot"}`))
	f.Add(uint8(0), 409, []byte(`{"code":"room_name_taken","error":"taken"}`))
	f.Add(uint8(0), 503, []byte(`{"code":"draining","error":"d","retryable":true}`))
	f.Add(uint8(0), 200, []byte(`not json`))
	st := wire.MigrationState{RoomName: "@room@", Incarnation: "inc-1", HostPhase: "active", HostActive: true, Port: 443, UDPPortV2: 7778}
	cur, _ := json.Marshal(st)
	f.Add(uint8(1), 200, cur)
	grant, _ := json.Marshal(wire.MigrationGrant{Grant: "g", ClaimID: "c1", Incarnation: "inc-1", Generation: 1, PromotedPlayerID: "7", ExpiresAt: "2026-01-01T00:00:00Z"})
	f.Add(uint8(2), 200, grant)
	st.Generation, st.FencingToken, st.PromotedPlayerID = 2, "fence", "7"
	claim, _ := json.Marshal(wire.MigrationClaim{MigrationState: st, Secret: "new-host", ClaimID: "c1"})
	f.Add(uint8(3), 200, claim)
	f.Add(uint8(3), 200, []byte(`{"roomName":"@room@","incarnation":"i","hostPhase":"p","generation":1,"fencingToken":"f","secret":"s","claimId":"c1","port":1,"udpPortV2":1}`))
	act, _ := json.Marshal(wire.MigrationActivation{MigrationState: st, ClaimID: "c1"})
	f.Add(uint8(4), 200, act)
	f.Add(uint8(4), 409, []byte(`{"code":"generation_mismatch","error":"g"}`))
	f.Add(uint8(4), 409, []byte(`{"code":"something_else","error":"secret 12345"}`))
	f.Add(uint8(5), 200, []byte(`{"role":"relay","bootId":"relay-boot"}`))
	f.Add(uint8(5), 200, []byte(`{"bootId":""}`))
	f.Add(uint8(6), 200, []byte(`{"name":"@room@","closed":true,"connections":2,"bootId":"relay-boot"}`))
	f.Add(uint8(6), 200, []byte(`{"name":"@room@","closed":false}`))
	f.Add(uint8(6), 404, []byte(`{"code":"not_found","error":"no"}`))

	s, fr := newFuzzBalancer(f)
	h := s.Handler()
	n := 0
	f.Fuzz(func(t *testing.T, kind uint8, status int, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		n++
		room, allocID := "fz-"+strconv.Itoa(n), "a-"+strconv.Itoa(n)
		body = replaceAll(replaceAll(body, "@room@", room), "@alloc@", allocID)
		answer := func(*http.Request) (int, []byte) { return status, body }
		allocate := func() (int, []byte) {
			req := httptest.NewRequest(http.MethodPost, "/allocate_ws", nil)
			req.Header.Set(wire.HeaderName, room)
			req.Header.Set(wire.HeaderAllocationID, allocID)
			return serveFuzz(t, h, req)
		}
		defer func() { fr.mu.Lock(); fr.answer = nil; fr.mu.Unlock() }()
		switch k := kind % 7; k {
		case 0:
			fr.mu.Lock()
			fr.answer = answer
			fr.mu.Unlock()
			code, out := allocate()
			if code != http.StatusOK {
				return
			}
			var c wire.Capability
			var ra wire.RelayAllocation
			if json.Unmarshal(out, &c) != nil || c.Validate() != nil || c.Host != fuzzRelayInfo.Host || json.Unmarshal(body, &ra) != nil || c.Secret != ra.Capability.Secret {
				t.Fatalf("relay answer %d %s gave %s", status, body, out)
			}
			req := httptest.NewRequest(http.MethodGet, "/join", nil)
			req.Header.Set(wire.HeaderName, room)
			if code, out := serveFuzz(t, h, req); code != http.StatusOK || json.Unmarshal(out, &c) != nil || c.Secret != ra.Publication.ClientSecret {
				t.Fatalf("join after allocation %s: %d %s", body, code, out)
			}
		case 1, 2, 3, 4:
			if code, out := allocate(); code != http.StatusOK {
				t.Fatalf("allocation: %d %s", code, out)
			}
			fr.mu.Lock()
			fr.answer = answer
			fr.mu.Unlock()
			op := wire.MigrationOp(k - 1)
			mr := wire.MigrationRequest{Op: op, Name: room, Secret: "client-secret", ClaimID: "c1", Incarnation: "inc-1",
				ExpectedGeneration: 1, PromotedPlayerID: "7", FencingToken: "fence"}
			req := httptest.NewRequest(op.Method(), op.PublicPath(), nil)
			mr.SetHeaders(req.Header)
			code, out := serveFuzz(t, h, req)
			if code != http.StatusOK {
				return
			}
			if status != http.StatusOK {
				t.Fatalf("relay %d %s forwarded as 200 %s", status, body, out)
			}
			var ms wire.MigrationState
			var ids struct {
				ClaimID string `json:"claimId"`
				SSL     *bool  `json:"ssl"`
			}
			if json.Unmarshal(out, &ids) != nil {
				t.Fatalf("answer %s", out)
			}
			switch op {
			case wire.OpAuthorize:
				var g wire.MigrationGrant
				if json.Unmarshal(out, &g) != nil || g.Grant == "" || g.ClaimID != "c1" || g.ExpiresAt == "" {
					t.Fatalf("grant %s from %s", out, body)
				}
				return
			case wire.OpClaim:
				var c wire.MigrationClaim
				if json.Unmarshal(out, &c) != nil || c.Validate() != nil || c.Generation == 0 || c.FencingToken == "" || ids.SSL == nil {
					t.Fatalf("claim %s from %s", out, body)
				}
			}
			if json.Unmarshal(out, &ms) != nil || ms.RoomName != room || ms.Incarnation == "" || ms.HostPhase == "" || ms.Host != fuzzRelayInfo.Host ||
				op != wire.OpCurrent && ids.ClaimID != "c1" {
				t.Fatalf("%s answer %s from %s", op, out, body)
			}
		case 6:
			if code, out := allocate(); code != http.StatusOK {
				t.Fatalf("allocation: %d %s", code, out)
			}
			fr.mu.Lock()
			fr.answer = answer
			fr.mu.Unlock()
			req := httptest.NewRequest(http.MethodDelete, "/v1/rooms/"+room, nil)
			req.Header.Set("Authorization", "Bearer "+s.GeneratedAdminKey())
			code, out := serveFuzz(t, h, req)
			var rc wire.RelayRoomClosed
			var got wire.RoomClosed
			if code == http.StatusOK && (status != http.StatusOK || json.Unmarshal(body, &rc) != nil ||
				json.Unmarshal(out, &got) != nil || got.Name != room || got.Closed != rc.Closed) {
				t.Fatalf("relay close answer %d %s gave %s", status, body, out)
			}
		case 5:
			fr.mu.Lock()
			fr.answer = answer
			fr.mu.Unlock()
			boot, err := s.relays.probe(context.Background(), fuzzRelayInfo.Endpoint, time.Second)
			var p wire.Ping
			if err == nil && (status != http.StatusOK || boot == "" || json.Unmarshal(body, &p) != nil || p.BootID != boot) {
				t.Fatalf("ping %d %s proved %q", status, body, boot)
			}
		}
	})
}

func replaceAll(b []byte, old, new string) []byte {
	return []byte(strings.ReplaceAll(string(b), old, new))
}
