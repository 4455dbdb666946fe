package relay

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// meshBench is a room on a holder machine with its host connected
// directly and one client connected directly or through an edge machine
// (forwarded: one more hop, the link's queues and goroutines).
func meshBench(b *testing.B, forwarded bool) (host, client *wstest.Peer, id wire.ConnID) {
	b.Helper()
	mb := newMeshBalancer(b)
	holder := startMachine(b, mb, "m-holder")
	edge := startMachine(b, mb, "m-edge")
	hs, cs := allocateOn(b, holder, "bench")
	mb.place("bench", holder)
	host = join(b, holder, "bench", hs)
	via := holder
	if forwarded {
		via = edge
	}
	client = join(b, via, "bench", cs)
	return host, client, host.ExpectToHost(wire.ToHostConnected).IDs[0]
}

// BenchmarkMeshRoundTrip: one 64-byte packet client -> host -> client per
// op, on loopback sockets; ns/op is the round trip, direct against
// forwarded (the forwarding cost the load tool reports end to end).
func BenchmarkMeshRoundTrip(b *testing.B) {
	for _, mode := range []struct {
		name      string
		forwarded bool
	}{{"direct", false}, {"forwarded", true}} {
		b.Run(mode.name, func(b *testing.B) {
			host, client, id := meshBench(b, mode.forwarded)
			msg := make([]byte, 64)
			reply := wire.AppendSendOne(nil, id, msg)
			ctx, cancel := contextWithTimeout(time.Minute)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if err := client.WS.Write(ctx, websocket.MessageBinary, msg); err != nil {
					b.Fatal(err)
				}
				if _, _, err := host.WS.Read(ctx); err != nil {
					b.Fatal(err)
				}
				if err := host.WS.Write(ctx, websocket.MessageBinary, reply); err != nil {
					b.Fatal(err)
				}
				if _, _, err := client.WS.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMeshThroughput: client -> host packets pipelined (a window of
// 128 in flight), direct against forwarded; MB/s is the throughput.
func BenchmarkMeshThroughput(b *testing.B) {
	for _, mode := range []struct {
		name      string
		forwarded bool
	}{{"direct", false}, {"forwarded", true}} {
		b.Run(mode.name, func(b *testing.B) {
			host, client, _ := meshBench(b, mode.forwarded)
			msg := make([]byte, 1024)
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			b.ResetTimer()
			pipelineToHost(b, client, host, msg)
		})
	}
}
