package client

import (
	"context"
	"testing"
)

// BenchmarkHostToClient measures one forwarded packet through the fake relay:
// Host.SendOne, then Client.RecvInto. The fake relay's own costs (it reads
// with allocation) are included; the client's part allocates nothing (see
// TestReadsDoNotAllocate and TestSendOneDoesNotAllocate).
func BenchmarkHostToClient(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"64B", 64}, {"1KiB", 1024}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newFakeRelay(b, nil)
			r.addRoom("room", "h", "c")
			ctx := context.Background()
			h, err := DialHost(ctx, r.capability("h"), "room", nil)
			if err != nil {
				b.Fatal(err)
			}
			defer h.CloseNow()
			c, err := DialClient(ctx, r.capability("c"), "room", nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseNow()
			p, err := h.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			id := p.IDs[0]
			payload, buf := make([]byte, bc.size), make([]byte, ReadLimit)
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			for b.Loop() {
				if err := h.SendOne(ctx, id, payload); err != nil {
					b.Fatal(err)
				}
				if _, err := c.RecvInto(ctx, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
