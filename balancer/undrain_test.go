package balancer

import (
	"net/http"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// TestUndrainGivesTheRelayBack: an admin drain ends with POST
// /v1/instances/{id}/undrain (a failed rollout gives its relay back): the
// relay takes new rooms again, by boot id or machine id; a relay that
// drains by itself stays draining; an unknown id is not_found, and the
// route wants the operator's credential.
func TestUndrainGivesTheRelayBack(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.set(func(f *fakeRelay) { f.info.MachineID = "m-eu" })
	r.register(h)
	auth := map[string]string{"Authorization": "Bearer " + testSecret}
	post := func(path string, hdr map[string]string) (wire.Instance, *wire.Error) {
		t.Helper()
		st, body, _ := h.do(http.MethodPost, path, hdr, nil)
		var in wire.Instance
		return in, decodeAnswer(t, st, body, &in)
	}

	in, err := post("/v1/instances/"+r.boot()+"/drain", auth)
	noErr(t, err)
	if in.Status != wire.InstanceDraining {
		t.Fatalf("drain answered %+v", in)
	}
	_, aerr := h.allocate("while-drained", "eu", "a1")
	wantCode(t, aerr, wire.ErrNoRelays.Code)

	in, err = post("/v1/instances/m-eu/undrain", auth) // by machine id
	noErr(t, err)
	if in.Status != wire.InstanceLive || in.BootID != r.boot() {
		t.Fatalf("undrain answered %+v", in)
	}
	if _, aerr := h.allocate("after-undrain", "eu", "a2"); aerr != nil {
		t.Fatalf("allocation after the undrain: %v", aerr)
	}
	// Undrain is idempotent, and the drain mark does not come back with
	// the relay's next heartbeat.
	if in, err = post("/v1/instances/"+r.boot()+"/undrain", auth); err != nil || in.Status != wire.InstanceLive {
		t.Fatalf("second undrain: %+v %v", in, err)
	}
	r.register(h)
	if got := h.s.Instances(); len(got) != 1 || got[0].Status != wire.InstanceLive {
		t.Fatalf("after a heartbeat: %+v", got)
	}

	// A relay that says it drains (shutting down) is not undrained by an admin.
	var resp wire.RegisterResponse
	noErr(t, r.post(h, wire.PathRegister, wire.RegisterRequest{Relay: r.info, Draining: true}, &resp))
	if in, err = post("/v1/instances/"+r.boot()+"/undrain", auth); err != nil || in.Status != wire.InstanceDraining {
		t.Fatalf("undrain of a self-draining relay: %+v %v", in, err)
	}

	_, err = post("/v1/instances/no-such-boot/undrain", auth)
	wantCode(t, err, wire.ErrNotFound.Code)
	_, err = post("/v1/instances/"+r.boot()+"/undrain", nil)
	wantCode(t, err, wire.ErrUnauthorized.Code)
}

// TestUndrainOfARemovedBoot: undraining a boot the balancer removed (say,
// cut off for a while) clears its drain mark, so that when the same boot
// registers again it takes rooms.
func TestUndrainOfARemovedBoot(t *testing.T) {
	h := newHarness(t, nil)
	r := newFakeRelay(t, "eu")
	r.register(h)
	if _, ok := h.s.st.reg.setAdminDrain(r.boot(), true); !ok {
		t.Fatal("drain failed")
	}
	snaps := h.s.st.reg.snapshot()
	if len(snaps) != 1 || !h.s.st.reg.removeIf(snaps[0]) {
		t.Fatal("could not remove the relay")
	}
	if _, ok := h.s.st.reg.setAdminDrain(r.boot(), false); ok {
		t.Fatal("a removed boot was found")
	}
	r.register(h) // the same boot comes back
	if got := h.s.Instances(); len(got) != 1 || got[0].Status != wire.InstanceLive {
		t.Fatalf("the boot undrained while removed came back as %+v, want live", got)
	}
}
