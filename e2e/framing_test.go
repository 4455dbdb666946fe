package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestHostClientFraming checks the bytes: [0][id] on connect, [2][id][payload]
// for client data, the host's SEND_ONE payload arriving unframed, [1][id] on
// leave; the keepalive changes nothing.
func TestHostClientFraming(t *testing.T) {
	s := startDev(t, nil)
	o := allocHost(t, s.api, "eu", "framing")
	cl := joinClient(t, s.api, "framing")
	raw, err := o.host.ReadRaw(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 5 || raw[0] != wire.ToHostConnected {
		t.Fatalf("connect notice bytes %v, want [0][id:4]", raw)
	}
	id := wire.ConnID(binary.LittleEndian.Uint32(raw[1:]))
	if id == 0 || id > 0x7fffffff {
		t.Fatalf("connection id %d is not a positive int32", id)
	}
	if err := o.host.KeepAlive(tctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := cl.Send(tctx(t), []byte{0xde, 0xad, 0xbe, 0xef}); err != nil {
		t.Fatal(err)
	}
	raw, err = o.host.ReadRaw(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := wire.AppendHostData(nil, id, []byte{0xde, 0xad, 0xbe, 0xef}); !bytes.Equal(raw, want) {
		t.Fatalf("client data reached the host as %v, want %v", raw, want)
	}
	if err := o.host.SendOne(tctx(t), id, []byte{9, 8, 7}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, cl); !bytes.Equal(got, []byte{9, 8, 7}) {
		t.Fatalf("client got %v, want the bare payload [9 8 7]", got)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err = o.host.ReadRaw(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := wire.AppendDisconnected(nil, id); !bytes.Equal(raw, want) {
		t.Fatalf("leave notice %v, want %v", raw, want)
	}
}

// TestRoomOverMainHTTPPort: the relay's main HTTP port takes the same
// WebSocket at / (one Fly http_service carries everything): a client there
// and a host on the dedicated port share the room.
func TestRoomOverMainHTTPPort(t *testing.T) {
	s := startDev(t, nil, "eu")
	o := allocHost(t, s.api, "eu", "one-port")
	c, err := s.api.Join(tctx(t), "one-port")
	if err != nil {
		t.Fatal(err)
	}
	mainWS := "ws" + strings.TrimPrefix(s.relays[0].HTTPURL(), "http")
	cl, err := client.DialClient(tctx(t), c, "one-port", &client.DialOptions{URL: mainWS})
	if err != nil {
		t.Fatalf("client on the main HTTP port: %v", err)
	}
	defer cl.CloseNow()
	roundTrip(t, o.host, cl, expectConnected(t, o.host)[0], "main-port")
}

// TestLateHostGetsAllIDsInOnePacket: clients that joined before the host are
// announced to it in one [0][id][id][id] packet, right after its [3].
func TestLateHostGetsAllIDsInOnePacket(t *testing.T) {
	s := startDev(t, nil)
	c, err := s.api.Allocate(tctx(t), "eu", "late-host", client.NewAllocationID())
	if err != nil {
		t.Fatal(err)
	}
	var cls []*client.Client
	for i := 0; i < 3; i++ {
		cls = append(cls, joinClient(t, s.api, "late-host"))
	}
	h, err := client.DialHost(tctx(t), c, "late-host", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseNow()
	raw, err := h.ReadRaw(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if raw[0] != wire.ToHostConnected || len(raw) != 1+4*3 {
		t.Fatalf("first packet %v: want one [0] packet with 3 ids", raw)
	}
	p, _ := wire.ParseToHostPacket(raw)
	// Each client's traffic comes from one of the announced ids, all distinct.
	seen := map[wire.ConnID]bool{}
	for i, cl := range cls {
		if err := cl.Send(tctx(t), []byte{'c', byte(i)}); err != nil {
			t.Fatal(err)
		}
		d := next(t, h)
		if d.Type != wire.ToHostData || !slices.Contains(p.IDs, d.IDs[0]) || seen[d.IDs[0]] || !bytes.Equal(d.Payload, []byte{'c', byte(i)}) {
			t.Fatalf("data %+v does not match announced ids %v", d, p.IDs)
		}
		seen[d.IDs[0]] = true
	}
}

// TestKick: the host kicks a client: the client is closed, the host gets
// [1][id], others stay. A kick of another room's client is ignored.
func TestKick(t *testing.T) {
	s := startDev(t, nil)
	a := newPair(t, s.api, "eu", "kick-a")
	b := joinClient(t, s.api, "kick-a")
	bID := expectConnected(t, a.host)[0]
	other := newPair(t, s.api, "eu", "kick-other")

	if err := a.host.Kick(tctx(t), other.id); err != nil { // not in a's room
		t.Fatal(err)
	}
	if err := a.host.Kick(tctx(t), a.id); err != nil {
		t.Fatal(err)
	}
	if st := expectClosed(t, clientRead(a.cl)); st != client.StatusNormalClosure {
		t.Fatalf("kicked client closed with %d, want 1000", st)
	}
	expectDisconnected(t, a.host, a.id)
	roundTrip(t, a.host, b, bID, "after-kick")
	roundTrip(t, other.host, other.cl, other.id, "foreign-kick-ignored")
	// The host cannot kick itself out by naming an unknown id either.
	if err := a.host.Kick(tctx(t), 0x7ffffff0); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, a.host, b, bID, "unknown-kick")
}

// TestSmallClientPacketsDropped: empty and one-byte client packets never
// reach the host; the next real packet does.
func TestSmallClientPacketsDropped(t *testing.T) {
	s := startDev(t, nil)
	p := newPair(t, s.api, "eu", "small")
	for _, b := range [][]byte{{}, {7}, {0}, {1, 2}} {
		if err := p.cl.Send(tctx(t), b); err != nil {
			t.Fatal(err)
		}
	}
	expectData(t, p.host, p.id, []byte{1, 2}) // sentinel: the first thing the host sees
}

// TestTextFrameEndsConnection: a text frame ends the connection (before or
// after authentication); the host sees the client leave.
func TestTextFrameEndsConnection(t *testing.T) {
	s := startDev(t, nil)
	p := newPair(t, s.api, "eu", "text")
	if err := p.cl.Raw().WriteText(tctx(t), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if st := expectClosed(t, clientRead(p.cl)); st != 1003 && st != -1 {
		t.Fatalf("close status %d after a text frame, want 1003 (unsupported data) or an abrupt close", st)
	}
	expectDisconnected(t, p.host, p.id)

	r, err := client.DialRaw(tctx(t), s.relays[0].WSURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.CloseNow()
	if err := r.WriteText(tctx(t), []byte(`{"roomName":"text","clientSecret":"x"}`)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, func(ctx context.Context) error { _, err := r.Read(ctx); return err })
}

// TestMessageSizeLimit: 65,535-byte frames pass both ways; a client
// payload whose host frame would pass 65,535 bytes is dropped and counted
// (PurrNet's host socket would end the room); a message over 65,535 bytes
// closes the sender's connection and nothing else.
func TestMessageSizeLimit(t *testing.T) {
	s := startDev(t, nil)
	t.Run("client-65530-passes", func(t *testing.T) {
		p := newPair(t, s.api, "eu", "size-ok-up")
		big := bytes.Repeat([]byte{0xab}, wire.MaxMessageSize-5) // [2][sender:4] + payload = 65,535
		if err := p.cl.Send(tctx(t), big); err != nil {
			t.Fatal(err)
		}
		expectData(t, p.host, p.id, big)
	})
	t.Run("client-65531-to-65535-dropped", func(t *testing.T) {
		p := newPair(t, s.api, "eu", "size-drop-up")
		before := droppedTooLarge(t, s)
		for n := wire.MaxMessageSize - 4; n <= wire.MaxMessageSize; n++ {
			if err := p.cl.Send(tctx(t), bytes.Repeat([]byte{0xef}, n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.cl.Send(tctx(t), []byte("sentinel-after-oversize")); err != nil {
			t.Fatal(err)
		}
		expectData(t, p.host, p.id, []byte("sentinel-after-oversize")) // nothing came before it
		if got := droppedTooLarge(t, s) - before; got != 5 {
			t.Fatalf("too_large_for_host drops %v, want 5", got)
		}
		roundTrip(t, p.host, p.cl, p.id, "after-drops")
	})
	t.Run("host-65535-passes", func(t *testing.T) {
		p := newPair(t, s.api, "eu", "size-ok-down")
		big := bytes.Repeat([]byte{0xcd}, wire.MaxMessageSize-5) // [1][target:4] + payload = 65,535
		if err := p.host.SendOne(tctx(t), p.id, big); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, p.cl); !bytes.Equal(got, big) {
			t.Fatalf("client got %d bytes, want %d", len(got), len(big))
		}
	})
	t.Run("client-65536-closes", func(t *testing.T) {
		p := newPair(t, s.api, "eu", "size-big-up")
		stay := joinClient(t, s.api, "size-big-up")
		stayID := expectConnected(t, p.host)[0]
		if err := p.cl.Raw().WriteBinary(tctx(t), make([]byte, wire.MaxMessageSize+1)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, clientRead(p.cl))
		expectDisconnected(t, p.host, p.id)
		roundTrip(t, p.host, stay, stayID, "after-oversize")
	})
	t.Run("host-65536-closes", func(t *testing.T) {
		p := newPair(t, s.api, "eu", "size-big-down")
		if err := p.host.Raw().WriteBinary(tctx(t), wire.AppendSendOne(nil, p.id, make([]byte, wire.MaxMessageSize-4))); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, hostRead(p.host))
		expectClosed(t, clientRead(p.cl)) // the host left: its clients go too
	})
}

// TestHostLeaveDisconnectsClients: the host leaving closes every client of
// its room and no other; a room that had clients stays listed with 0
// players (host migration), an empty one goes at once.
func TestHostLeaveDisconnectsClients(t *testing.T) {
	s := startDev(t, nil)
	p := newPair(t, s.api, "eu", "host-leaves")
	second := joinClient(t, s.api, "host-leaves")
	expectConnected(t, p.host)
	bystander := newPair(t, s.api, "eu", "bystander")
	alone := allocHost(t, s.api, "eu", "host-alone")

	if err := p.host.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{p.cl, second} {
		if st := expectClosed(t, clientRead(c)); st != client.StatusNormalClosure {
			t.Fatalf("client closed with %d after its host left, want 1000", st)
		}
	}
	roundTrip(t, bystander.host, bystander.cl, bystander.id, "bystander")
	testutil.Eventually(t, 2*time.Second, "host-leaves at 0 players", func() bool {
		r, ok := listAll(t, s.api)["host-leaves"]
		return ok && r.ConnectedPlayers == 0
	})
	if _, ok := joinable(t, s.api, "host-leaves"); !ok {
		t.Fatal("a room whose host left with clients is no longer joinable (host migration needs it)")
	}

	if err := alone.host.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Second, "host-alone to vanish", func() bool {
		_, listed := listAll(t, s.api)["host-alone"]
		return !listed && notFound(t, s.api, "host-alone")
	})
}

// TestPipeMode: {"pipe":true} gets [5][id]; [target][data] arrives as
// [sender][data]; an unknown target is dropped.
func TestPipeMode(t *testing.T) {
	s := startDev(t, nil)
	url := s.relays[0].WSURL()
	a, err := client.DialPipe(tctx(t), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseNow()
	b, err := client.DialPipe(tctx(t), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.CloseNow()
	if a.ID() == 0 || b.ID() == 0 || a.ID() == b.ID() {
		t.Fatalf("pipe ids %d and %d: want distinct positive ids", a.ID(), b.ID())
	}
	if err := a.Send(tctx(t), 0x7ffffff0, []byte("lost")); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(tctx(t), b.ID(), []byte("a->b")); err != nil {
		t.Fatal(err)
	}
	if from, data, err := b.Recv(tctx(t)); err != nil || from != a.ID() || string(data) != "a->b" {
		t.Fatalf("b got %d %q %v, want %d a->b", from, data, err, a.ID())
	}
	if err := b.Send(tctx(t), a.ID(), []byte("b->a")); err != nil {
		t.Fatal(err)
	}
	if from, data, err := a.Recv(tctx(t)); err != nil || from != b.ID() || string(data) != "b->a" {
		t.Fatalf("a got %d %q %v, want %d b->a", from, data, err, b.ID())
	}
	// The relay's main HTTP port serves the same WebSocket at /.
	c, err := client.DialPipe(tctx(t), "ws"+s.relays[0].HTTPURL()[len("http"):], nil)
	if err != nil {
		t.Fatalf("pipe via the HTTP port: %v", err)
	}
	defer c.CloseNow()
	if err := c.Send(tctx(t), a.ID(), []byte("c->a")); err != nil {
		t.Fatal(err)
	}
	if from, data, err := a.Recv(tctx(t)); err != nil || from != c.ID() || string(data) != "c->a" {
		t.Fatalf("a got %d %q %v from the HTTP-port pipe", from, data, err)
	}
}

// TestSecondHostRefused: a second connection with the host credential fails
// authentication; the first host keeps its room.
func TestSecondHostRefused(t *testing.T) {
	s := startDev(t, nil)
	p := newPair(t, s.api, "eu", "one-host")
	_, err := client.DialHost(tctx(t), p.hostCap, "one-host", nil)
	if !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("second host: %v, want ErrAuthFailed", err)
	}
	roundTrip(t, p.host, p.cl, p.id, "first-host-kept")
}

// TestMalformedHostPacketsDisturbNothing: unknown types, truncated SEND_ONE
// and KICK, empty packets and targets outside the room are dropped: the
// host stays connected and other rooms keep flowing meanwhile.
func TestMalformedHostPacketsDisturbNothing(t *testing.T) {
	s := startDev(t, nil)
	bad := newPair(t, s.api, "eu", "malformed")
	good := newPair(t, s.api, "eu", "well-formed")
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() { // the other room keeps talking while the bad host misbehaves
		defer close(errc)
		for i := 0; i < 50; i++ {
			select {
			case <-done:
				return
			default:
			}
			msg := []byte{'g', byte(i)}
			if err := good.cl.Send(tctx(t), msg); err != nil {
				errc <- err
				return
			}
			p, err := good.host.Next(tctx(t))
			if err != nil || p.Type != wire.ToHostData || !bytes.Equal(p.Payload, msg) {
				errc <- errors.New("good room lost a packet")
				return
			}
		}
	}()
	for _, pkt := range [][]byte{
		{},              // empty
		{9, 1, 0, 0, 0}, // unknown type
		{0xff},          // unknown type, no body
		{1, 1, 0},       // truncated SEND_ONE
		{1},             // SEND_ONE without target
		{2, 1},          // truncated KICK
		wire.AppendSendOne(nil, good.id, []byte("not yours")), // target in another room
		wire.AppendKick(nil, good.id),                         // kick in another room
		wire.AppendSendOne(nil, bad.id, nil),                  // empty payload
	} {
		if err := bad.host.Raw().WriteBinary(tctx(t), pkt); err != nil {
			t.Fatal(err)
		}
	}
	if err := bad.host.SendOne(tctx(t), bad.id, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, bad.cl); string(got) != "still here" {
		t.Fatalf("client got %q, want the first valid packet after the junk", got)
	}
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	roundTrip(t, good.host, good.cl, good.id, "after-junk")
	roundTrip(t, bad.host, bad.cl, bad.id, "bad-host-kept")
}

// TestEmptyRoomExpires: a room nobody uses expires after the empty-room
// timeout, though its relay republishes it on every heartbeat meanwhile;
// a room with its host connected stays; an expired name can be allocated
// again.
func TestEmptyRoomExpires(t *testing.T) {
	const timeout = 400 * time.Millisecond
	s := startDev(t, func(o *devstack.Options) { o.EmptyRoomTimeout = timeout }, "eu")
	busy := newPair(t, s.api, "eu", "busy")
	allocated := time.Now()
	if _, err := s.api.Allocate(tctx(t), "eu", "unused", client.NewAllocationID()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*time.Second, "the unused room to expire", func() bool { return notFound(t, s.api, "unused") })
	if el := time.Since(allocated); el < timeout {
		t.Fatalf("the unused room expired after %v, before the %v timeout", el, timeout)
	}
	if _, listed := listAll(t, s.api)["unused"]; listed {
		t.Fatal("an expired room is still listed")
	}
	roundTrip(t, busy.host, busy.cl, busy.id, "busy-stays")
	if _, ok := joinable(t, s.api, "busy"); !ok {
		t.Fatal("a room with a host expired")
	}
	if _, err := s.api.Allocate(tctx(t), "eu", "unused", client.NewAllocationID()); err != nil {
		t.Fatalf("allocate an expired name again: %v", err)
	}
}

// droppedTooLarge sums purrfly_relay_dropped_packets_total{reason=
// "too_large_for_host"} over the stack's relays.
func droppedTooLarge(t testing.TB, s *stack) float64 {
	t.Helper()
	const series = `purrfly_relay_dropped_packets_total{reason="too_large_for_host"} `
	var total float64
	for _, r := range s.relays {
		a := do(t, http.MethodGet, r.HTTPURL()+"/metrics", nil, nil)
		for line := range strings.Lines(string(a.body)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), series); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("metric %s: %v", line, err)
				}
				total += n
			}
		}
	}
	return total
}
