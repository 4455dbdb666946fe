package balancer

import (
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestRelayRepeatsTheOperatorsDrain: a heartbeat's answer tells a relay
// an operator drained it; a balancer that does not know the boot yet (a
// restart, a standby taking over) drains it when the relay repeats that.
// One that knows the boot decides itself: an undrain holds against a
// heartbeat still repeating the drain, before and after a health removal.
func TestRelayRepeatsTheOperatorsDrain(t *testing.T) {
	h, _ := adminHarness(t, nil, func(o *Options) { o.HealthFailures = 1 })
	a := h.admin(adminKeyA)
	r := newFakeRelay(t, "eu")
	beat := func(drained bool) wire.RegisterResponse {
		t.Helper()
		var resp wire.RegisterResponse
		if err := r.post(h, wire.PathRegister, wire.RegisterRequest{Relay: r.info, AdminDrained: drained}, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	status := func() string {
		t.Helper()
		in, err := a.Instance(t.Context(), r.boot())
		if err != nil {
			t.Fatal(err)
		}
		return in.Status
	}
	if resp := beat(false); resp.AdminDrained {
		t.Fatal("a relay nobody drained was told it is drained")
	}
	if _, err := a.Drain(t.Context(), r.boot()); err != nil {
		t.Fatal(err)
	}
	if resp := beat(false); !resp.AdminDrained {
		t.Fatal("the heartbeat's answer does not tell the relay of its drain")
	}

	// A new balancer: the relay repeats the drain.
	fresh, _ := adminHarness(t, nil, nil)
	var resp wire.RegisterResponse
	if err := r.post(fresh, wire.PathRegister, wire.RegisterRequest{Relay: r.info, AdminDrained: true}, &resp); err != nil {
		t.Fatal(err)
	}
	if in, err := fresh.admin(adminKeyA).Instance(t.Context(), r.boot()); err != nil || in.Status != wire.InstanceDraining || !resp.AdminDrained {
		t.Fatalf("a new balancer forgot the repeated drain: %+v %v, answer %+v", in, err, resp)
	}

	// This balancer knows the boot: an undrain holds.
	if _, err := a.Undrain(t.Context(), r.boot()); err != nil {
		t.Fatal(err)
	}
	if resp := beat(true); resp.AdminDrained || status() != wire.InstanceLive {
		t.Fatalf("a repeated drain undid the undrain: answer %+v, status %s", resp, status())
	}
	// Drained, removed by its health probe, undrained while away, back
	// repeating the drain: still undrained.
	if _, err := a.Drain(t.Context(), r.boot()); err != nil {
		t.Fatal(err)
	}
	r.set(func(f *fakeRelay) { f.pingFail = true })
	failHealth(h, 1)
	if len(h.servers()) != 0 {
		t.Fatal("the relay was not removed")
	}
	if _, err := a.Undrain(t.Context(), r.boot()); err != nil && !wantWire(err, wire.ErrInstanceNotFound) {
		t.Fatal(err)
	}
	r.set(func(f *fakeRelay) { f.pingFail = false })
	if resp := beat(true); resp.AdminDrained || status() != wire.InstanceLive {
		t.Fatalf("a removed relay undrained while away came back drained: answer %+v, status %s", resp, status())
	}
}
