package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// Rooms, hosts and clients, driven only through package client.

// open is a room with its host connected.
type open struct {
	name    string
	hostCap wire.Capability
	host    *client.Host
}

// allocHost allocates name (POST, fresh allocation id) and connects its host.
func allocHost(t testing.TB, api *client.Balancer, region, name string) *open {
	t.Helper()
	c, err := api.Allocate(tctx(t), region, name, client.NewAllocationID())
	if err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
	h, err := client.DialHost(tctx(t), c, name, nil)
	if err != nil {
		t.Fatalf("host of %s: %v", name, err)
	}
	t.Cleanup(func() { _ = h.CloseNow() })
	return &open{name: name, hostCap: c, host: h}
}

// joinClient joins name and connects a client.
func joinClient(t testing.TB, api *client.Balancer, name string) *client.Client {
	t.Helper()
	c, err := api.Join(tctx(t), name)
	if err != nil {
		t.Fatalf("join %s: %v", name, err)
	}
	cl, err := client.DialClient(tctx(t), c, name, nil)
	if err != nil {
		t.Fatalf("client of %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cl.CloseNow() })
	return cl
}

// next reads the next relay -> host packet.
func next(t testing.TB, h *client.Host) wire.ToHostPacket {
	t.Helper()
	p, err := h.Next(tctx(t))
	if err != nil {
		t.Fatalf("host %s: %v", h.Room(), err)
	}
	return p
}

// expectConnected reads one connect notice and returns its ids.
func expectConnected(t testing.TB, h *client.Host) []wire.ConnID {
	t.Helper()
	p := next(t, h)
	if p.Type != wire.ToHostConnected || len(p.IDs) == 0 {
		t.Fatalf("host %s: got packet type %d ids %v, want a connect notice", h.Room(), p.Type, p.IDs)
	}
	return p.IDs
}

// expectData reads one data packet and checks sender and payload.
func expectData(t testing.TB, h *client.Host, from wire.ConnID, payload []byte) {
	t.Helper()
	p := next(t, h)
	if p.Type != wire.ToHostData || p.IDs[0] != from || !bytes.Equal(p.Payload, payload) {
		t.Fatalf("host %s: got type %d ids %v payload %.40q, want data from %d %.40q",
			h.Room(), p.Type, p.IDs, p.Payload, from, payload)
	}
}

// expectDisconnected reads one disconnect notice for id.
func expectDisconnected(t testing.TB, h *client.Host, id wire.ConnID) {
	t.Helper()
	p := next(t, h)
	if p.Type != wire.ToHostDisconnected || p.IDs[0] != id {
		t.Fatalf("host %s: got type %d ids %v, want disconnect of %d", h.Room(), p.Type, p.IDs, id)
	}
}

// recv reads the next payload a client got.
func recv(t testing.TB, c *client.Client) []byte {
	t.Helper()
	b, err := c.Recv(tctx(t))
	if err != nil {
		t.Fatalf("client of %s: %v", c.Room(), err)
	}
	return b
}

// expectClosed reads until the connection ends and returns its close status
// (-1 when it ended without a close frame).
func expectClosed(t testing.TB, read func(ctx context.Context) error) int {
	t.Helper()
	ctx := tctx(t)
	for i := 0; i < 100; i++ {
		if err := read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("connection still open after %v", stepTimeout)
			}
			return client.CloseStatus(err)
		}
	}
	t.Fatal("connection kept delivering messages instead of closing")
	return 0
}

func clientRead(c *client.Client) func(context.Context) error {
	return func(ctx context.Context) error { _, err := c.Recv(ctx); return err }
}

func hostRead(h *client.Host) func(context.Context) error {
	return func(ctx context.Context) error { _, err := h.ReadRaw(ctx); return err }
}

// roundTrip proves a host and one of its clients still talk both ways.
func roundTrip(t testing.TB, h *client.Host, c *client.Client, id wire.ConnID, tag string) {
	t.Helper()
	up := []byte("up-" + tag)
	if err := c.Send(tctx(t), up); err != nil {
		t.Fatalf("client send: %v", err)
	}
	expectData(t, h, id, up)
	down := []byte("down-" + tag)
	if err := h.SendOne(tctx(t), id, down); err != nil {
		t.Fatalf("host send: %v", err)
	}
	if got := recv(t, c); !bytes.Equal(got, down) {
		t.Fatalf("client got %q, want %q", got, down)
	}
}

// pair is a room with a host and one client, introduced to each other.
type pair struct {
	*open
	cl *client.Client
	id wire.ConnID
}

func newPair(t testing.TB, api *client.Balancer, region, name string) *pair {
	t.Helper()
	o := allocHost(t, api, region, name)
	cl := joinClient(t, api, name)
	ids := expectConnected(t, o.host)
	if len(ids) != 1 {
		t.Fatalf("connect notice ids %v, want one", ids)
	}
	return &pair{open: o, cl: cl, id: ids[0]}
}

// ---- balancer views ----

// listAll returns every listed room by name, paging until done.
func listAll(t testing.TB, api *client.Balancer) map[string]wire.RoomSummary {
	t.Helper()
	out := map[string]wire.RoomSummary{}
	for page := 0; page < 100; page++ {
		l, err := api.List(t.Context(), page)
		if err != nil {
			t.Fatalf("list page %d: %v", page, err)
		}
		for _, r := range l.Results {
			out[r.Name] = r
		}
		if len(l.Results) == 0 || len(out) >= l.Total {
			break
		}
	}
	return out
}

// joinable reports whether /join answers name with a usable capability.
func joinable(t testing.TB, api *client.Balancer, name string) (wire.Capability, bool) {
	c, err := api.Join(t.Context(), name)
	return c, err == nil
}

// notFound reports whether /join answers room_not_found for name.
func notFound(t testing.TB, api *client.Balancer, name string) bool {
	_, err := api.Join(t.Context(), name)
	return errors.Is(err, wire.ErrRoomNotFound)
}

// portOf returns the port of a URL.
func portOf(t testing.TB, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("split %q: %v", u.Host, err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func roomName(prefix string, i int) string { return fmt.Sprintf("%s-%03d", prefix, i) }
