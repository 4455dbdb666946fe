package client

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

func TestRelayURL(t *testing.T) {
	for _, tc := range []struct {
		c    wire.Capability
		want string
	}{
		{wire.Capability{Host: "relay.example", Port: 6942}, "ws://relay.example:6942"},
		{wire.Capability{Host: "relay.example", Port: 443, SSL: true}, "wss://relay.example"},
		{wire.Capability{Host: "relay.example", Port: 80}, "ws://relay.example"},
		{wire.Capability{Host: "relay.example", Port: 443}, "ws://relay.example:443"},
		{wire.Capability{Host: "::1", Port: 6942}, "ws://[::1]:6942"},
		{wire.Capability{Host: "[::1]", Port: 443, SSL: true}, "wss://[::1]"},
	} {
		got, err := RelayURL(tc.c)
		if err != nil || got != tc.want {
			t.Errorf("RelayURL(%+v) = %q, %v; want %q", tc.c, got, err, tc.want)
		}
	}
	for _, h := range []string{"", "a/b", "a?b", "user@a", "a b", "a#b"} {
		if u, err := RelayURL(wire.Capability{Host: h, Port: 1}); err == nil {
			t.Errorf("RelayURL(host %q) = %q, want an error", h, u)
		}
	}
}

func TestAuthMessageBytes(t *testing.T) {
	got := string(AuthMessage("room<&>\"", "s", false))
	want := `{"roomName":"room<&>\"","clientSecret":"s","nat":false}`
	if got != want {
		t.Fatalf("AuthMessage = %s, want %s", got, want)
	}
	if PipeAuthJSON != `{"pipe":true}` {
		t.Fatalf("PipeAuthJSON = %s", PipeAuthJSON)
	}
}

// roomFixture is a fake relay with one room and its two capabilities.
func roomFixture(t *testing.T, knobs func(*fakeRelay)) (*fakeRelay, wire.Capability, wire.Capability) {
	t.Helper()
	r := newFakeRelay(t, knobs)
	r.addRoom("room-1", "host-secret", "client-secret")
	return r, r.capability("host-secret"), r.capability("client-secret")
}

// TestHostClientSession walks a whole room session and checks the exact
// bytes in both directions.
func TestHostClientSession(t *testing.T) {
	r, hc, cc := roomFixture(t, nil)
	ctx := testCtx(t, 10*time.Second)

	purrNet := &DialOptions{NoSessionHint: true}      // connect exactly like PurrNet
	c1, err := DialClient(ctx, cc, "room-1", purrNet) // before the host: batch notice later
	if err != nil {
		t.Fatalf("DialClient: %v", err)
	}
	defer c1.CloseNow()
	h, err := DialHost(ctx, hc, "room-1", purrNet)
	if err != nil {
		t.Fatalf("DialHost: %v", err)
	}
	defer h.CloseNow()
	p, err := h.Next(ctx)
	if err != nil || p.Type != wire.ToHostConnected || len(p.IDs) != 1 {
		t.Fatalf("host first packet = %+v, %v; want connected [id]", p, err)
	}
	id1 := p.IDs[0]
	c2, err := DialClient(ctx, cc, "room-1", purrNet)
	if err != nil {
		t.Fatalf("DialClient 2: %v", err)
	}
	defer c2.CloseNow()
	p, err = h.Next(ctx)
	if err != nil || p.Type != wire.ToHostConnected || len(p.IDs) != 1 || p.IDs[0] == id1 {
		t.Fatalf("host packet = %+v, %v; want connected [id2]", p, err)
	}
	id2 := p.IDs[0]

	// Exact auth bytes and upgrade requests: empty path, no query.
	auths, reqs, _, _ := r.snapshot()
	wantClient := `{"roomName":"room-1","clientSecret":"client-secret","nat":false}`
	wantHost := `{"roomName":"room-1","clientSecret":"host-secret","nat":false}`
	if len(auths) != 3 || string(auths[0]) != wantClient || string(auths[1]) != wantHost || string(auths[2]) != wantClient {
		t.Fatalf("auth messages = %q", auths)
	}
	for _, req := range reqs {
		if req.URL.Path != "/" || req.URL.RawQuery != "" {
			t.Fatalf("upgrade request %q, want path / and no query", req.URL)
		}
	}

	// Client -> host arrives as [2][sender][payload].
	if err := c2.Send(ctx, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	p, err = h.Next(ctx)
	if err != nil || p.Type != wire.ToHostData || p.IDs[0] != id2 || string(p.Payload) != "hello" {
		t.Fatalf("host got %+v, %v; want data from %d", p, err, id2)
	}
	// Host keepalive, SEND_ONE and a raw unknown packet; the client gets the payload unframed.
	if err := h.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteRaw(ctx, []byte{9, 9}); err != nil {
		t.Fatal(err)
	}
	if err := h.SendOne(ctx, id1, []byte{0xde, 0xad}); err != nil {
		t.Fatal(err)
	}
	got, err := c1.Recv(ctx)
	if err != nil || !bytes.Equal(got, []byte{0xde, 0xad}) {
		t.Fatalf("client got %x, %v", got, err)
	}
	_, _, hostMsgs, _ := r.snapshot()
	wantMsgs := [][]byte{{0}, {9, 9}, append([]byte{1}, append(le32bytes(id1), 0xde, 0xad)...)}
	if len(hostMsgs) != 3 {
		t.Fatalf("host sent %x, want %x", hostMsgs, wantMsgs)
	}
	for i := range wantMsgs {
		if !bytes.Equal(hostMsgs[i], wantMsgs[i]) {
			t.Fatalf("host message %d = %x, want %x", i, hostMsgs[i], wantMsgs[i])
		}
	}

	// Kick: the kicked client sees its connection end; the host gets [1][id].
	if err := h.Kick(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Recv(ctx); err == nil {
		t.Fatal("kicked client: want the connection to end")
	}
	p, err = h.Next(ctx)
	if err != nil || p.Type != wire.ToHostDisconnected || p.IDs[0] != id1 {
		t.Fatalf("host got %+v, %v; want disconnected %d", p, err, id1)
	}
	// Client leaves by Close.
	if err := c2.Close(); err != nil {
		t.Fatalf("client Close: %v", err)
	}
	p, err = h.Next(ctx)
	if err != nil || p.Type != wire.ToHostDisconnected || p.IDs[0] != id2 {
		t.Fatalf("host got %+v, %v; want disconnected %d", p, err, id2)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("host Close: %v", err)
	}
	_, _, hostMsgs, _ = r.snapshot()
	if k := hostMsgs[len(hostMsgs)-1]; !bytes.Equal(k, append([]byte{2}, le32bytes(id1)...)) {
		t.Fatalf("kick bytes = %x", k)
	}
}

// TestSessionHint: the hint is ?s=<hex(room)>, sent by default, and
// NoSessionHint connects like PurrNet (empty path, no query).
func TestSessionHint(t *testing.T) {
	r, hc, _ := roomFixture(t, nil)
	ctx := testCtx(t, 10*time.Second)
	h, err := DialHost(ctx, hc, "room-1", &DialOptions{HTTPHeader: http.Header{"Fly-Force-Instance-Id": {"m1"}}})
	if err != nil {
		t.Fatal(err)
	}
	h.CloseNow()
	_, reqs, _, _ := r.snapshot()
	if got := reqs[0].URL.RawQuery; got != "s=726f6f6d2d31" {
		t.Fatalf("query = %q, want s=726f6f6d2d31", got)
	}
	if reqs[0].Header.Get("fly-force-instance-id") != "m1" {
		t.Fatal("extra handshake header missing")
	}
}

func TestAuthFailures(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	t.Run("wrong secret", func(t *testing.T) {
		_, hc, _ := roomFixture(t, nil)
		hc.Secret = "nope"
		if _, err := DialHost(ctx, hc, "room-1", nil); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("err = %v, want ErrAuthFailed", err)
		}
	})
	t.Run("second host", func(t *testing.T) {
		_, hc, _ := roomFixture(t, nil)
		h, err := DialHost(ctx, hc, "room-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer h.CloseNow()
		if _, err := DialHost(ctx, hc, "room-1", nil); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("err = %v, want ErrAuthFailed", err)
		}
	})
	t.Run("unexpected reply", func(t *testing.T) {
		_, _, cc := roomFixture(t, func(r *fakeRelay) { r.authReply = []byte{3, 0} })
		if _, err := DialClient(ctx, cc, "room-1", nil); !errors.Is(err, ErrUnexpectedReply) {
			t.Fatalf("err = %v, want ErrUnexpectedReply", err)
		}
	})
	t.Run("silent relay times out", func(t *testing.T) {
		_, _, cc := roomFixture(t, func(r *fakeRelay) { r.silentAuth = true })
		sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := DialClient(sctx, cc, "room-1", nil)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
			t.Fatalf("err = %v after %s, want a deadline soon after 200ms", err, time.Since(start))
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		c := wire.Capability{Host: "127.0.0.1", Port: 1, Secret: "s", UDPPortV2: 1}
		if _, err := DialClient(ctx, c, "room-1", nil); err == nil {
			t.Fatal("want a dial error")
		}
	})
	t.Run("invalid capability", func(t *testing.T) {
		if _, err := DialHost(ctx, wire.Capability{Host: "h", Port: 1, UDPPortV2: 1}, "room-1", nil); !errors.Is(err, wire.ErrRelayBadAnswer) {
			t.Fatalf("err = %v, want relay_bad_answer", err)
		}
		if _, err := DialHost(ctx, wire.Capability{Host: "h", Secret: "s", Port: 1, UDPPortV2: 1}, "", nil); err == nil {
			t.Fatal("empty room: want an error")
		}
	})
}

// clientThenHost dials a client of room-1 and then its host (both closed
// when the test ends) and returns them with the client's id, read from the
// host's first packet.
func clientThenHost(t *testing.T, ctx context.Context, hc, cc wire.Capability) (*Client, *Host, wire.ConnID) {
	t.Helper()
	c, err := DialClient(ctx, cc, "room-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	h, err := DialHost(ctx, hc, "room-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.CloseNow() })
	p, err := h.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c, h, p.IDs[0]
}

// TestSizeLimits: no write over 65,535 bytes leaves Host, Client or Pipe;
// Raw can; reads refuse beyond ReadLimit (65,535 bytes).
func TestSizeLimits(t *testing.T) {
	r, hc, cc := roomFixture(t, nil)
	ctx := testCtx(t, 10*time.Second)
	c, h, id := clientThenHost(t, ctx, hc, cc)

	if err := h.SendOne(ctx, id, make([]byte, wire.MaxMessageSize-4)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SendOne 65,536-byte frame: err = %v, want ErrTooLarge", err)
	}
	if err := h.WriteRaw(ctx, make([]byte, wire.MaxMessageSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("WriteRaw: err = %v, want ErrTooLarge", err)
	}
	if err := c.Send(ctx, make([]byte, wire.MaxMessageSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Send: err = %v, want ErrTooLarge", err)
	}
	// The largest allowed messages go through.
	big := bytes.Repeat([]byte{7}, wire.MaxMessageSize-5)
	if err := h.SendOne(ctx, id, big); err != nil {
		t.Fatal(err)
	}
	got, err := c.Recv(ctx)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("client got %d bytes, %v", len(got), err)
	}
	// The relay framing [2][id] on a 65,530-byte client payload: 65,535
	// bytes reach the host, exactly ReadLimit. (A real relay drops a larger
	// client payload; our fake relay forwards whatever it gets.)
	full := bytes.Repeat([]byte{8}, wire.MaxMessageSize-5)
	if err := c.Send(ctx, full); err != nil {
		t.Fatal(err)
	}
	p, err := h.Next(ctx)
	if err != nil || p.Type != wire.ToHostData || !bytes.Equal(p.Payload, full) {
		t.Fatalf("host got type %d, %d bytes, %v", p.Type, len(p.Payload), err)
	}
	_, _, _, tooBig := r.snapshot()
	if tooBig != 0 {
		t.Fatalf("relay saw %d oversized messages, want 0", tooBig)
	}
	// Raw sends what the others refuse; the relay ends that connection with 1009.
	if err := c.Raw().WriteBinary(ctx, make([]byte, wire.MaxMessageSize+1)); err != nil {
		t.Fatalf("Raw oversized write: %v", err)
	}
	_, err = c.Recv(ctx)
	if CloseStatus(err) != StatusMessageTooBig {
		t.Fatalf("after oversized write: err = %v (status %d), want close 1009", err, CloseStatus(err))
	}
}

// TestReadLimit: a relay message beyond ReadLimit ends the connection with 1009.
func TestReadLimit(t *testing.T) {
	srv, url := wsServer(t, func(ctx context.Context, c *websocket.Conn) {
		c.SetReadLimit(wire.MaxAuthSize)
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
		_ = c.Write(ctx, websocket.MessageBinary, []byte{wire.Authenticated})
		_ = c.Write(ctx, websocket.MessageBinary, make([]byte, ReadLimit))
		_ = c.Write(ctx, websocket.MessageBinary, make([]byte, ReadLimit+1))
		_, _, _ = c.Read(ctx)
	})
	_ = srv
	ctx := testCtx(t, 10*time.Second)
	c, err := DialClient(ctx, wire.Capability{}, "room", &DialOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if b, err := c.Recv(ctx); err != nil || len(b) != ReadLimit {
		t.Fatalf("ReadLimit-byte message: %d bytes, %v", len(b), err)
	}
	if _, err := c.Recv(ctx); !errors.Is(err, websocket.ErrMessageTooBig) {
		t.Fatalf("oversized message: err = %v, want ErrMessageTooBig", err)
	}
}

// TestCloseStatusAndText: a relay drain (1012) is visible through
// CloseStatus; a text message is refused as ErrTextFrame.
func TestCloseStatusAndText(t *testing.T) {
	r, hc, cc := roomFixture(t, func(r *fakeRelay) { r.textToClients = true })
	ctx := testCtx(t, 10*time.Second)
	c, h, id := clientThenHost(t, ctx, hc, cc)
	if err := h.SendOne(ctx, id, []byte("as text")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(ctx); !errors.Is(err, ErrTextFrame) {
		t.Fatalf("text message: err = %v, want ErrTextFrame", err)
	}
	// The relay's close handshake needs the peer to read: drain while the
	// host reads, as a live PurrNet host always does.
	c.CloseNow()
	drained := make(chan struct{})
	go func() { defer close(drained); r.closeAll(websocket.StatusServiceRestart) }()
	defer func() { <-drained }()
	var err error
	for range 3 { // the client's disconnect notice may come first
		if _, err = h.Next(ctx); err != nil {
			break
		}
	}
	if CloseStatus(err) != StatusServiceRestart {
		t.Fatalf("after drain: err = %v, status %d; want 1012", err, CloseStatus(err))
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close after the relay closed: %v", err)
	}
}

// TestPipe: {"pipe":true}, [5][id] reply, [target][data] out, [sender][data] in.
func TestPipe(t *testing.T) {
	r := newFakeRelay(t, nil)
	ctx := testCtx(t, 10*time.Second)
	a, err := DialPipe(ctx, r.wsURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseNow()
	b, err := DialPipe(ctx, r.wsURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.CloseNow()
	if a.ID() == 0 || a.ID() == b.ID() {
		t.Fatalf("pipe ids %d and %d", a.ID(), b.ID())
	}
	if err := a.Send(ctx, b.ID(), []byte("meow")); err != nil {
		t.Fatal(err)
	}
	from, data, err := b.Recv(ctx)
	if err != nil || from != a.ID() || string(data) != "meow" {
		t.Fatalf("pipe b got %d %q %v", from, data, err)
	}
	if err := a.Send(ctx, b.ID(), make([]byte, wire.MaxMessageSize-3)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized pipe send: %v", err)
	}
	auths, _, _, _ := r.snapshot()
	for _, au := range auths {
		if string(au) != `{"pipe":true}` {
			t.Fatalf("pipe auth = %s", au)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRaw: raw writes arrive with their message type; bad auth bytes are
// just bytes.
func TestRaw(t *testing.T) {
	got := make(chan string, 4)
	_, url := wsServer(t, func(ctx context.Context, c *websocket.Conn) {
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			got <- typ.String() + ":" + string(b)
			if typ == websocket.MessageText {
				_ = c.Write(ctx, websocket.MessageText, []byte("t"))
			} else {
				_ = c.Write(ctx, websocket.MessageBinary, []byte{wire.AuthFailed})
			}
		}
	})
	ctx := testCtx(t, 10*time.Second)
	raw, err := DialRaw(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.CloseNow()
	if err := raw.WriteBinary(ctx, []byte(`{"roomName":`)); err != nil {
		t.Fatal(err)
	}
	if b, err := raw.Read(ctx); err != nil || !bytes.Equal(b, []byte{4}) {
		t.Fatalf("Read = %x, %v", b, err)
	}
	if err := raw.WriteText(ctx, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if b, err := raw.Read(ctx); !errors.Is(err, ErrTextFrame) || string(b) != "t" {
		t.Fatalf("Read text = %q, %v", b, err)
	}
	if a, b := <-got, <-got; a != `MessageBinary:{"roomName":` || b != "MessageText:hi" {
		t.Fatalf("server saw %q, %q", a, b)
	}
	if err := raw.Close(StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
}
