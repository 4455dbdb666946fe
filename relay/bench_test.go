package relay

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// BenchmarkRelayLoopback pushes client packets through a real relay on
// loopback sockets to the host (pipelined: a sender goroutine and the
// benchmark reading). Allocation numbers include the test peers' own
// coder/websocket reads, so only ns/op and MB/s speak for the relay.
func BenchmarkRelayLoopback(b *testing.B) {
	for _, sz := range []struct {
		name string
		size int
	}{{"64B", 64}, {"1KiB", 1024}} {
		b.Run(sz.name, func(b *testing.B) {
			s := startRelay(b, Options{})
			hs, cs := mustAllocate(b, s, "bench")
			host := join(b, s, "bench", hs)
			client := join(b, s, "bench", cs)
			host.ExpectToHost(wire.ToHostConnected)
			msg := make([]byte, sz.size)
			b.SetBytes(int64(sz.size))
			b.ReportAllocs()
			b.ResetTimer()
			pipelineToHost(b, client, host, msg)
		})
	}
}

// pipelineToHost sends b.N copies of msg from client to host with a window
// of 128 messages in flight, and reads them all at the host. The relay
// bounds each receiver's backlog and disconnects one that falls too far
// behind, so an unbounded sender would measure that instead.
func pipelineToHost(b *testing.B, client, host *wstest.Peer, msg []byte) {
	b.Helper()
	window := make(chan struct{}, 128)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := contextWithTimeout(time.Minute)
		defer cancel()
		for range b.N {
			window <- struct{}{}
			if err := client.WS.Write(ctx, websocket.MessageBinary, msg); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	ctx, cancel := contextWithTimeout(time.Minute)
	defer cancel()
	for range b.N {
		if _, _, err := host.WS.Read(ctx); err != nil {
			b.Fatal(err)
		}
		<-window
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
