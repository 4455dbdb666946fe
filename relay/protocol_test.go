package relay

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// hostWithClient allocates a room, connects its host and one client and
// returns them with the client's id as the host learned it.
func hostWithClient(t *testing.T, s *Server, name string) (host, client *wstest.Peer, id wire.ConnID) {
	t.Helper()
	hs, cs := mustAllocate(t, s, name)
	host = join(t, s, name, hs)
	client = join(t, s, name, cs)
	pk := host.ExpectToHost(wire.ToHostConnected)
	if len(pk.IDs) != 1 || pk.IDs[0] == 0 {
		t.Fatalf("connected notice %v, want one positive id", pk.IDs)
	}
	return host, client, pk.IDs[0]
}

func TestAuthentication(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "room")

	cases := []struct {
		name string
		msg  []byte
	}{
		{"wrong secret", wire.Auth{RoomName: "room", ClientSecret: "nope"}.Marshal()},
		{"unknown room", wire.Auth{RoomName: "other", ClientSecret: cs}.Marshal()},
		{"malformed json", []byte(`{"roomName":`)},
		{"not json", []byte{1, 2, 3}},
		{"oversized auth", append([]byte(`{"roomName":"room","clientSecret":"`+cs+`","x":"`), bytes.Repeat([]byte("a"), wire.MaxAuthSize)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := wstest.Dial(t, s.WSURL())
			p.Send(tc.msg)
			if got := p.Recv(); !bytes.Equal(got, []byte{wire.AuthFailed}) {
				t.Fatalf("reply %v, want [4]", got)
			}
			if code := p.Closed(); code != websocket.StatusPolicyViolation {
				t.Fatalf("close status %v, want 1008", code)
			}
		})
	}

	// A good client and host still work on the same relay, also through the
	// upgrade at / on the HTTP port.
	join(t, s, "room", cs)
	h := wstest.Dial(t, "ws"+s.HTTPURL()[len("http"):]+"/")
	if got := h.Auth("room", hs); got != wire.Authenticated {
		t.Fatalf("host auth via HTTP port: %d", got)
	}
	if got := metricValue(t, s, "purrfly_relay_auth_total", "result", "failed"); got != float64(len(cases)) {
		t.Fatalf("auth failures counted %v, want %d", got, len(cases))
	}
}

func TestSecondHostRefused(t *testing.T) {
	s := startRelay(t, Options{})
	hs, _ := mustAllocate(t, s, "room")
	join(t, s, "room", hs)
	second := wstest.Dial(t, s.WSURL())
	if got := second.Auth("room", hs); got != wire.AuthFailed {
		t.Fatalf("second host: reply %d, want 4", got)
	}
	second.Closed()
}

func TestHostAfterClientsGetsAllIDsInOnePacket(t *testing.T) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "room")
	for range 3 {
		join(t, s, "room", cs)
	}
	host := join(t, s, "room", hs)
	pk := host.ExpectToHost(wire.ToHostConnected)
	if len(pk.IDs) != 3 || !slices.IsSorted(pk.IDs) || pk.IDs[0] == 0 {
		t.Fatalf("ids %v, want three distinct positive ids in one packet", pk.IDs)
	}
	if pk.IDs[0] == pk.IDs[1] || pk.IDs[1] == pk.IDs[2] {
		t.Fatalf("ids not unique: %v", pk.IDs)
	}
	// A client joining later is announced on its own.
	join(t, s, "room", cs)
	if pk := host.ExpectToHost(wire.ToHostConnected); len(pk.IDs) != 1 {
		t.Fatalf("late join ids %v", pk.IDs)
	}
}

func TestForwarding(t *testing.T) {
	s := startRelay(t, Options{})
	host, client, id := hostWithClient(t, s, "room")

	// Client -> host: [2][sender][payload]; a one-byte packet is dropped.
	client.Send([]byte{9})
	client.Send([]byte("hello"))
	pk := host.ExpectToHost(wire.ToHostData)
	if pk.IDs[0] != id || !equal(pk.Payload, "hello") {
		t.Fatalf("host got %v %q", pk.IDs, pk.Payload)
	}
	// Host -> client: SEND_ONE payload arrives unframed.
	host.Send(sendOne(id, "world"))
	if got := client.Recv(); !equal(got, "world") {
		t.Fatalf("client got %q", got)
	}
	// Keepalive, unknown type, truncated SEND_ONE, empty SEND_ONE, unknown
	// target: all dropped without disturbing anything.
	host.Send([]byte{wire.HostKeepAlive})
	host.Send([]byte{7, 1, 2})
	host.Send([]byte{wire.HostSendOne, 1, 2})
	host.Send(sendOne(id, ""))
	host.Send(sendOne(id+1000, "lost"))
	host.Send(sendOne(id, "again"))
	if got := client.Recv(); !equal(got, "again") {
		t.Fatalf("client got %q after bad packets", got)
	}
	client.Send([]byte("still"))
	if pk := host.ExpectToHost(wire.ToHostData); !equal(pk.Payload, "still") {
		t.Fatalf("host got %q", pk.Payload)
	}
	for reason, want := range map[string]float64{core.DropSmallClient: 1, core.DropUnknown: 1, core.DropTruncated: 1,
		core.DropEmptyPayload: 1, core.DropBadTarget: 1} {
		if got := drops(t, s, reason); got != want {
			t.Errorf("drops[%s] = %v, want %v", reason, got, want)
		}
	}
	// A client leaving is announced.
	_ = client.WS.Close(websocket.StatusNormalClosure, "")
	if pk := host.ExpectToHost(wire.ToHostDisconnected); pk.IDs[0] != id {
		t.Fatalf("disconnect id %v, want %d", pk.IDs, id)
	}
}

func TestSendOneToAnotherRoomIgnored(t *testing.T) {
	s := startRelay(t, Options{})
	hostA, _, _ := hostWithClient(t, s, "a")
	hostB, clientB, idB := hostWithClient(t, s, "b")
	hostA.Send(sendOne(idB, "intrusion"))
	hostA.Send(wire.AppendKick(nil, idB))
	waitFor(t, "both dropped", func() bool { return drops(t, s, core.DropBadTarget) == 2 })
	// Room b's own host still reaches its client, which was neither sent
	// the intrusion nor kicked.
	hostB.Send(sendOne(idB, "legit"))
	if got := clientB.Recv(); !equal(got, "legit") {
		t.Fatalf("client b got %q, want the legit packet first", got)
	}
}

func TestKick(t *testing.T) {
	s := startRelay(t, Options{})
	host, client, id := hostWithClient(t, s, "room")
	other := join(t, s, "room", mustClientSecret(t, s, "room"))
	otherID := host.ExpectToHost(wire.ToHostConnected).IDs[0]

	// Kicking an id of another room, or a nonexistent one, does nothing.
	host.Send(wire.AppendKick(nil, id+5000))
	host.Send(wire.AppendKick(nil, id))
	if code := client.Closed(); code != websocket.StatusNormalClosure {
		t.Fatalf("kicked client close status %v", code)
	}
	if pk := host.ExpectToHost(wire.ToHostDisconnected); pk.IDs[0] != id {
		t.Fatalf("disconnect notice %v, want %d", pk.IDs, id)
	}
	host.Send(sendOne(otherID, "still here"))
	if got := other.Recv(); !equal(got, "still here") {
		t.Fatalf("other client got %q", got)
	}
	waitFor(t, "count 2", func() bool { return s.Stats().Connections == 2 })
}

func mustClientSecret(t *testing.T, s *Server, name string) string {
	t.Helper()
	r := s.core.Room(name)
	return r.ClientSecret()
}

func TestTextFrameCloses(t *testing.T) {
	s := startRelay(t, Options{})
	host, client, _ := hostWithClient(t, s, "room")
	ctx := t.Context()
	if err := client.WS.Write(ctx, websocket.MessageText, []byte("hi there")); err != nil {
		t.Fatal(err)
	}
	if code := client.Closed(); code != websocket.StatusUnsupportedData {
		t.Fatalf("close status %v, want 1003", code)
	}
	host.ExpectToHost(wire.ToHostDisconnected)
}

func TestMessageSizeLimit(t *testing.T) {
	s := startRelay(t, Options{})
	host, client, id := hostWithClient(t, s, "room")
	// The host's socket takes at most 65,535 bytes (PurrNet's
	// SimpleWebTransport drops the connection beyond): a 65,530-byte
	// payload arrives as a 65,535-byte [2][sender:4][payload] frame.
	fits := bytes.Repeat([]byte{6}, wire.MaxMessageSize-5)
	client.Send(fits)
	if b := host.Recv(); len(b) != wire.MaxMessageSize || b[0] != wire.ToHostData || idOf(b[1:]) != id ||
		!bytes.Equal(b[5:], fits) {
		t.Fatalf("largest forwardable message: host got a %d-byte frame", len(b))
	}
	// Up to 65,535 bytes is still a legal client message, but it would make
	// a frame the host cannot take: dropped and counted, nobody disconnected.
	dropped := drops(t, s, core.DropTooLargeForHost)
	for n := wire.MaxMessageSize - 4; n <= wire.MaxMessageSize; n++ {
		client.Send(bytes.Repeat([]byte{7}, n))
	}
	client.Send([]byte("sentinel"))
	if pk := host.ExpectToHost(wire.ToHostData); pk.IDs[0] != id || !equal(pk.Payload, "sentinel") {
		t.Fatalf("after the oversized ones the host got %d bytes, want the sentinel", len(pk.Payload))
	}
	if got := drops(t, s, core.DropTooLargeForHost) - dropped; got != 5 {
		t.Fatalf("too_large_for_host drops %v, want 5", got)
	}
	host.Send(sendOne(id, "still here"))
	if got := client.Recv(); !equal(got, "still here") {
		t.Fatalf("client got %q after its oversized messages", got)
	}
	big := bytes.Repeat([]byte{7}, wire.MaxMessageSize)
	// One byte more than a message ends the connection.
	if err := client.WS.Write(t.Context(), websocket.MessageBinary, append(big, 7)); err != nil {
		t.Fatal(err)
	}
	if code := client.Closed(); code != websocket.StatusMessageTooBig && code != -1 {
		t.Fatalf("close status %v, want 1009", code)
	}
	host.ExpectToHost(wire.ToHostDisconnected)
}

func TestHostLeave(t *testing.T) {
	s := startRelay(t, Options{})
	t.Run("with clients the room stays, count 0", func(t *testing.T) {
		host, client, _ := hostWithClient(t, s, "kept")
		_ = host.WS.Close(websocket.StatusNormalClosure, "")
		if code := client.Closed(); code != websocket.StatusNormalClosure {
			t.Fatalf("client close status %v", code)
		}
		r := s.core.Room("kept")
		if r == nil {
			t.Fatal("room with clients was removed when its host left")
		}
		waitFor(t, "count 0", func() bool {
			return r.Count() == 0 && s.Stats().Connections == 0
		})
	})
	t.Run("alone the room is removed", func(t *testing.T) {
		hs, _ := mustAllocate(t, s, "gone")
		host := join(t, s, "gone", hs)
		_ = host.WS.Close(websocket.StatusNormalClosure, "")
		waitFor(t, "room removed", func() bool { return s.core.Room("gone") == nil })
	})
}

func TestPipe(t *testing.T) {
	s := startRelay(t, Options{})
	pipe := func() (*wstest.Peer, wire.ConnID) {
		p := wstest.Dial(t, s.WSURL())
		p.Send([]byte(`{"pipe":true}`))
		b := p.Recv()
		if len(b) != 5 || b[0] != wire.PipeAuthenticated {
			t.Fatalf("pipe reply %v", b)
		}
		return p, idOf(b[1:])
	}
	a, ida := pipe()
	b, idb := pipe()
	a.Send(wire.AppendPipe(nil, idb, []byte("ping")))
	peerID, data, err := wire.ParsePipe(b.Recv())
	if err != nil || peerID != ida || !equal(data, "ping") {
		t.Fatalf("b got %d %q %v", peerID, data, err)
	}
	b.Send(wire.AppendPipe(nil, 999999, []byte("nowhere")))
	b.Send([]byte{1, 2})
	b.Send(wire.AppendPipe(nil, ida, []byte("pong")))
	if peerID, data, _ := wire.ParsePipe(a.Recv()); peerID != idb || !equal(data, "pong") {
		t.Fatalf("a got %d %q", peerID, data)
	}
}

func TestEmptyRoomExpiry(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	// (The idle room never sees its host: the host window, which
	// TestUnhostedRoomReleased tries, is set past the test.)
	s := startRelay(t, Options{Clock: fake, EmptyRoomTimeout: 300 * time.Second, HostConnectTimeout: 2 * time.Hour})
	waitFor(t, "cleanup ticker", func() bool { return fake.Waiters() >= 1 })
	mustAllocate(t, s, "idle")
	hs, cs := mustAllocate(t, s, "busy")
	_ = join(t, s, "busy", hs)
	c := join(t, s, "busy", cs)
	_ = c

	// The rule, run here on the fake clock's time (the cleanup loop's tick
	// would run it concurrently, and a check after Advance could come
	// before that tick: a check that cannot fail).
	fake.Advance(299 * time.Second)
	s.core.Expire()
	if s.core.Room("idle") == nil {
		t.Fatal("idle room expired early")
	}
	// The loop's own tick expires it once the timeout has passed.
	fake.Advance(31 * time.Second)
	waitFor(t, "idle room expired", func() bool { return s.core.Room("idle") == nil })
	fake.Advance(time.Hour)
	s.core.Expire()
	if s.core.Room("busy") == nil {
		t.Fatal("a room with connections expired")
	}
}

// TestUnhostedRoomReleased: an allocated room whose host never connects is
// released by the cleanup loop's first tick past the host window, well
// before the empty-room timeout, and counted; its slot takes a new room.
// A room whose host came stays.
func TestUnhostedRoomReleased(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	s := startRelay(t, Options{Clock: fake, MaxRooms: 2})
	waitFor(t, "cleanup ticker", func() bool { return fake.Waiters() >= 1 })
	mustAllocate(t, s, "squatted")
	hs, _ := mustAllocate(t, s, "played")
	_ = join(t, s, "played", hs)
	if _, status, _ := allocate(t, s, "third", "id-3"); status != http.StatusServiceUnavailable {
		t.Fatalf("a third room at the bound: %d, want 503", status)
	}
	fake.Advance(DefaultHostConnectTimeout - time.Second)
	s.core.Expire()
	if s.core.Room("squatted") == nil {
		t.Fatal("released before the host window")
	}
	// Through the relay's own cleanup loop: a tick the loop was still busy
	// for is dropped, as a time.Ticker's is, so each look advances another
	// interval (the hosted room never expires).
	waitFor(t, "the unhosted room released", func() bool {
		if s.core.Room("squatted") == nil {
			return true
		}
		fake.Advance(DefaultCleanupInterval)
		return false
	})
	if s.core.Room("played") == nil {
		t.Fatal("a hosted room released by the host window")
	}
	if got := metricValue(t, s, "purrfly_relay_rooms_unhosted_total", "", ""); got != 1 || s.core.UnhostedReleased() != 1 {
		t.Fatalf("purrfly_relay_rooms_unhosted_total %v (heartbeat count %d), want 1", got, s.core.UnhostedReleased())
	}
	mustAllocate(t, s, "third")
}
