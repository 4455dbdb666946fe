package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/wire"
)

// FuzzPeerAnswers feeds arbitrary answers (status and body) to the relay's
// calls to the balancer and to other machines of its app, through the
// real client code with an in-process transport: where a room lives
// (locator), a handover's credentials, and the heartbeat, publish and
// unregister answers. Nothing panics, and nothing malformed is taken for
// an answer: a location or a handover is used only when complete and about
// the room asked for, and an outbox entry leaves only on a confirming
// result (applied, already or superseded) for exactly that entry.
func FuzzPeerAnswers(f *testing.F) {
	loc, _ := json.Marshal(wire.RoomLocation{Name: "room-1", BootID: "b2", MachineID: "m2", Endpoint: "http://[fdaa::2]:8080/", Host: "relay.example:443", Port: 443})
	f.Add(uint8(0), 200, loc)
	f.Add(uint8(0), 404, []byte(`{"code":"room_not_found","error":"no such room","retryable":false}`))
	f.Add(uint8(0), 200, []byte(`{"name":"other","bootId":"b"}`))
	ho, _ := json.Marshal(wire.HandoverResponse{Name: "room-1", HostSecret: "h", ClientSecret: "c", From: wire.Incarnation{BootID: "b2", Epoch: "e1"}})
	f.Add(uint8(1), 200, ho)
	f.Add(uint8(1), 409, []byte(`{"code":"handover_refused"}`))
	f.Add(uint8(2), 200, []byte(`{"balancerBoot":"bb","new":true,"republish":true,"livenessVersion":3,"handover":true}`))
	f.Add(uint8(3), 200, []byte(`{"results":[{"name":"room-1","epoch":"e1","status":"applied"},{"name":"x","status":"weird"}]}`))
	f.Add(uint8(4), 200, []byte(`{"results":[{"name":"room-1","epoch":"e1","status":"applied"},{"name":"room-2","epoch":"e2","status":"retry"},{"name":"room-3","epoch":"other","status":"already"}]}`))
	f.Add(uint8(4), 500, []byte(`<html>`))
	f.Add(uint8(2), 200, []byte(`null`))

	s, err := New(Options{Secret: testSecret, Logger: testLogger(), Metrics: prometheus.NewRegistry(),
		BootID: "boot-fuzz", BalancerURL: "http://balancer.invalid", MultiMachine: true})
	if err != nil {
		f.Fatal(err)
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	f.Cleanup(func() { s.cancel(nil) })
	var status int
	var body []byte
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})}
	s.mesh.loc.client, s.reg.client = hc, hc
	holder := wire.RoomLocation{Name: "room-1", BootID: "b2", Endpoint: "http://[fdaa::2]:8080"}
	f.Fuzz(func(t *testing.T, kind uint8, st int, b []byte) {
		if st < 100 || st > 999 {
			return // net/http never hands a client another status
		}
		status, body = st, b
		ctx := context.Background()
		switch kind % 5 {
		case 0:
			e, err := s.mesh.loc.get(ctx, "room-1")
			switch {
			case err != nil:
				if !errors.Is(err, errLocateUnavailable) || e.found {
					t.Fatalf("locate: %+v, %v", e, err)
				}
			case e.found:
				if st != 200 || e.loc.Name != "room-1" || e.loc.BootID == "" || strings.HasSuffix(e.loc.Endpoint, "/") {
					t.Fatalf("locate took %d %s as %+v", st, b, e.loc)
				}
			default:
				if !errors.Is(wire.DecodeError(st, b), wire.ErrRoomNotFound) {
					t.Fatalf("locate took %d %s for no such room", st, b)
				}
			}
		case 1:
			h, err := s.mesh.askHandover(ctx, holder, wire.Auth{RoomName: "room-1", ClientSecret: "h"})
			if err == nil && (st != 200 || h.Name != "room-1" || h.HostSecret == "" || h.ClientSecret == "" || h.From.Epoch == "") {
				t.Fatalf("handover took %d %s as %+v", st, b, h)
			}
		case 2:
			ok := s.reg.heartbeat(ctx)
			var resp wire.RegisterResponse
			if ok != (st/100 == 2 && json.Unmarshal(b, &resp) == nil) || ok && s.reg.balancerBoot != resp.BalancerBoot {
				t.Fatalf("heartbeat %v on %d %s", ok, st, b)
			}
		case 3:
			var resp wire.PublishResponse
			if ok := s.reg.publish(ctx, []wire.Publication{{Name: "room-1", Epoch: "e1", Revision: 1, ClientSecret: "c"}}, false); ok != (st/100 == 2 && json.Unmarshal(b, &resp) == nil) {
				t.Fatalf("publish %v on %d %s", ok, st, b)
			}
		case 4:
			rems := []wire.Removal{{Name: "room-1", Epoch: "e1", Revision: 2}, {Name: "room-2", Epoch: "e2", Revision: 1}, {Name: "room-3", Epoch: "e3", Revision: 5}}
			s.reg.mu.Lock()
			clear(s.reg.outbox)
			for _, r := range rems {
				s.reg.outbox[r] = struct{}{}
			}
			s.reg.mu.Unlock()
			ok := s.reg.unregister(ctx, rems)
			var resp wire.UnregisterResponse
			if ok != (st/100 == 2 && json.Unmarshal(b, &resp) == nil) {
				t.Fatalf("unregister %v on %d %s", ok, st, b)
			}
			s.reg.mu.Lock()
			defer s.reg.mu.Unlock()
			for _, r := range rems {
				if _, kept := s.reg.outbox[r]; kept {
					continue
				}
				confirmed := false
				for _, res := range resp.Results {
					confirmed = confirmed || res.Name == r.Name && res.Epoch == r.Epoch &&
						(res.Status == wire.RemApplied || res.Status == wire.RemAlready || res.Status == wire.RemSuperseded)
				}
				if !confirmed {
					t.Fatalf("%+v left the outbox on %s", r, b)
				}
			}
		}
	})
}

// roundTrip is an http.RoundTripper from a function: answers without a
// network.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
