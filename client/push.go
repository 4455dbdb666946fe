package client

import (
	"context"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// Push delivery: instead of a goroutine of the caller's waiting in Recv
// (or Next) for each message, the connection hands every message to a
// function as it arrives. Over UDP that function runs on the LiteNetLib
// endpoint's reader goroutine, inside the read that brought the datagram:
// no queue, no copy, no hand-off to another goroutine. A plain UDP socket
// read by a goroutine of its own costs one goroutine wake-up per message;
// the queued Recv path costs two (the endpoint's reader, then the
// caller's), which at game rates on a small machine is a measurable
// share of a load generator's CPU and of the latency it reports (bench).
// Over WebSocket there is no such reader, so a goroutine of the
// connection's own reads and calls the function.

// OnMessage hands every payload the host sends from now on to fn, in
// order, instead of Recv: messages already queued first, on the caller's
// goroutine before OnMessage returns, then each as it arrives, on the
// connection's reader (over UDP, the LiteNetLib endpoint's goroutine;
// over WebSocket, one of the connection's own). fn must return quickly
// and must not keep msg, which is reused once it returns; it may send.
// arrival is when the kernel received the datagram that delivered msg,
// with DialOptions.UDPArrivals on Linux; else the zero time. When the
// connection ends, end is called once with the reason, after the last
// fn, on whichever goroutine ended it (the reader, a timeout, a sender,
// or Close's caller), so it must not take a lock its caller may hold.
// Recv and its kin must not be called once OnMessage has been.
func (c *Client) OnMessage(fn func(d wire.Delivery, msg []byte, arrival time.Time), end func(error)) {
	pushTo(c.l, fn, end)
}

// OnEvent is Next's push form, OnMessage for a host: each relay -> host
// packet is decoded (ParseEvent) and handed to fn with the decoding's
// error, its Arrival set as OnMessage's arrival. The Event aliases a
// buffer that is reused once fn returns.
func (h *Host) OnEvent(fn func(Event, error), end func(error)) {
	pushTo(h.l, func(d wire.Delivery, b []byte, at time.Time) {
		e, err := ParseEvent(b)
		e.Delivery, e.Arrival = d, at
		fn(e, err)
	}, end)
}

// pushTo starts push delivery on l.
func pushTo(l link, fn func(wire.Delivery, []byte, time.Time), end func(error)) {
	if u, ok := l.(*udpLink); ok {
		u.push(fn, end)
		return
	}
	go func() {
		buf := make([]byte, ReadLimit)
		for {
			d, n, err := l.readInto(context.Background(), buf)
			if err != nil {
				end(fmt.Errorf("failed to read from relay: %w", err))
				return
			}
			fn(d, buf[:n], time.Time{})
		}
	}()
}
