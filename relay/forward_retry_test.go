package relay

import (
	"net"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// TestForwardTriesAStaleHolderTwice: a holder that cannot be dialed may
// be a stale answer, so the edge forgets it and looks the room up once
// more, then gives up: two lookups, an answer [4] at once, not a retry
// loop until ForwardTimeout.
func TestForwardTriesAStaleHolderTwice(t *testing.T) {
	b := newMeshBalancer(t)
	edge := startMachine(t, b, "edge")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	b.mu.Lock()
	b.rooms["stale"] = wire.RoomLocation{Name: "stale", BootID: "dead-boot", MachineID: "dead", Endpoint: dead,
		Host: "app.test", Port: 443, Region: "ams"}
	before := b.lookups
	b.mu.Unlock()

	p := dial(t, edge.WSURL())
	start := time.Now()
	if got := p.auth("stale", "whatever"); got != wire.AuthFailed {
		t.Fatalf("auth reply %d, want [4]", got)
	}
	if d := time.Since(start); d >= edge.opts.ForwardTimeout {
		t.Fatalf("answered after %v, the whole forward timeout", d)
	}
	b.mu.Lock()
	n := b.lookups - before
	b.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d lookups of a room whose holder is gone, want 2 (the answer, then once more)", n)
	}
	if v := counterValue(edge.mesh.m.forwards.WithLabelValues("unreachable")); v != 1 {
		t.Fatalf("forwards unreachable = %v, want 1", v)
	}
}
