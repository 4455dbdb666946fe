package balancer

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// TestEndpointProofsAreSerialized: the balancer proves one endpoint at a
// time and takes a new boot only if the endpoint reports that boot right
// now, so a late heartbeat of the process before cannot take a restarted
// endpoint back.
//
// Two boots' proofs of one endpoint interleave: the prior process's proof
// reads its /ping answer (it was still running) and is held before that
// answer reaches the balancer; meanwhile the process restarts and the new
// boot registers. Serialized, the new boot's proof waits for the old one
// and replaces it; without the gate the new boot is installed first and the
// late proof of the dead process then takes the endpoint back, locking the
// running relay out (its heartbeats stale, its rooms unjoinable).
func TestEndpointProofsAreSerialized(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.RelayTimeout = time.Minute // the held proof must not time out: only the order is under test
		o.HealthInterval = 1000 * time.Hour
	})
	r := newFakeRelay(t, "eu")
	r.client.Timeout = time.Minute
	prior := r.info

	entered, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	r.set(func(f *fakeRelay) {
		f.pingHook = func() { // handlePing has read the boot it answers
			if held.CompareAndSwap(false, true) { // the first proof only
				close(entered)
				<-release
			}
		}
	})
	type answer struct {
		resp wire.RegisterResponse
		err  *wire.Error
	}
	priorDone := make(chan answer, 1)
	go func() {
		resp, err := r.registerAs(h, prior)
		priorDone <- answer{resp, err}
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the prior boot's proof never reached /ping")
	}

	next := r.restart() // the endpoint now reports the new boot
	nextDone := make(chan answer, 1)
	go func() {
		resp, err := r.registerAs(h, next)
		nextDone <- answer{resp, err}
	}()
	// The new boot's proof either waits behind the held one (serialized)
	// or, without serialization, runs to its end.
	waitFor(t, "the new boot's proof to queue behind the held one or finish", func() bool {
		if len(nextDone) > 0 {
			return true
		}
		g := h.s.st.reg
		g.mu.RLock()
		defer g.mu.RUnlock()
		pg := g.gates[prior.Endpoint]
		return pg != nil && pg.users == 2
	})
	close(release)
	a, b := <-priorDone, <-nextDone
	noErr(t, a.err) // its /ping did report it: proven, then replaced
	noErr(t, b.err)
	if !b.resp.New || !b.resp.Republish {
		t.Fatalf("the new boot's registration answered %+v, want New and Republish", b.resp)
	}

	// The running process owns the endpoint: its heartbeat is a plain
	// refresh, its room is joinable, and the dead process stays out.
	resp, err := r.registerAs(h, next)
	if err != nil {
		t.Fatalf("the restarted relay's next heartbeat was refused (%s): the prior boot's late proof reclaimed the endpoint", err.Code)
	}
	if resp.New {
		t.Fatalf("the restarted relay's next heartbeat answered %+v, want a plain refresh", resp)
	}
	wantStatuses(t, r.publish(h, pub("room", "e1", 1, 1)), wire.PubApplied)
	if _, jerr := h.join("room"); jerr != nil {
		t.Fatalf("join of the restarted relay's room: %v", jerr)
	}
	_, err = r.registerAs(h, prior)
	wantCode(t, err, wire.ErrStaleBoot.Code)
	if insts := h.s.Instances(); len(insts) != 1 || insts[0].BootID != next.BootID {
		t.Fatalf("instances %+v, want only boot %s", insts, next.BootID)
	}
}
