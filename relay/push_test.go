package relay

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// Push delivery (client.OnMessage, client.Host.OnEvent) over every
// transport: a message read with Recv, then the rest of what was already
// sent (some of it queued before the switch, some arriving after) and
// what is sent later reach the function in order and with their delivery
// method; the host's events arrive decoded; over UDP with arrival stamps
// asked for, each message has the kernel's (none over WebSocket); when the
// room ends, each side's end function is called once, after its last
// message.
func TestPushDelivery(t *testing.T) {
	for _, tr := range []client.Transport{client.TransportWebSocket, client.TransportUDP, client.TransportUDP1} {
		t.Run(tr.String(), func(t *testing.T) { testPushDelivery(t, tr) })
	}
}

type pushed struct {
	d   wire.Delivery
	msg string
	at  time.Time // the arrival stamp
	got time.Time // when fn ran
	end error     // set on the end call
}

// checkArrival fails unless p's arrival stamp fits the transport: over
// UDP one taken before fn ran, over WebSocket none.
func checkArrival(t *testing.T, tr client.Transport, p pushed) {
	t.Helper()
	if tr.UDP() != !p.at.IsZero() || p.at.After(p.got) {
		t.Fatalf("%v: message %q arrived at %v, handed over at %v", tr, p.msg, p.at, p.got)
	}
}

func testPushDelivery(t *testing.T, tr client.Transport) {
	s := startRelay(t, Options{})
	hs, cs := mustAllocate(t, s, "push")
	dial := func(secret string) (wire.Capability, *client.DialOptions) {
		switch tr {
		case client.TransportUDP:
			return udpCap(s, secret)
		case client.TransportUDP1:
			return udp1Cap(s, secret)
		}
		return wire.Capability{Host: "127.0.0.1", Port: 1, Secret: secret}, &client.DialOptions{URL: s.WSURL()}
	}
	c, o := dial(hs)
	o.UDPArrivals = true
	host, err := client.DialHost(tctx(t), c, "push", o)
	if err != nil {
		t.Fatalf("host: %v", err)
	}
	defer host.CloseNow()
	c, o = dial(cs)
	o.UDPArrivals = true
	cl, err := client.DialClient(tctx(t), c, "push", o)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.CloseNow()
	id := nextOfType(t, host, wire.ToHostConnected).IDs[0]

	for _, m := range []string{"m0", "m1", "m2", "m3"} {
		if err := host.SendOne(tctx(t), id, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := cl.Recv(tctx(t)); err != nil || string(got) != "m0" {
		t.Fatalf("Recv: %q, %v", got, err)
	}
	// Buffered beyond what the test sends: fn and end must not block.
	toClient := make(chan pushed, 16)
	cl.OnMessage(func(d wire.Delivery, msg []byte, at time.Time) {
		toClient <- pushed{d: d, msg: string(msg), at: at, got: time.Now()}
	},
		func(err error) { toClient <- pushed{end: err} })
	for _, m := range []string{"m4", "m5"} {
		if err := host.SendOne(tctx(t), id, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"m1", "m2", "m3", "m4", "m5"} {
		p := recvPushed(t, toClient)
		if p.end != nil || p.msg != want || p.d != wire.ReliableOrdered {
			t.Fatalf("client was pushed %+v, want %q ReliableOrdered", p, want)
		}
		checkArrival(t, tr, p)
	}

	toHost := make(chan pushed, 16)
	host.OnEvent(func(e client.Event, err error) {
		toHost <- pushed{d: e.Delivery, msg: fmt.Sprintf("%d/%d/%s/%v", e.Type, e.ID, e.Payload, err), at: e.Arrival, got: time.Now()}
	}, func(err error) { toHost <- pushed{end: err} })
	if err := cl.Send(tctx(t), []byte("up")); err != nil {
		t.Fatal(err)
	}
	if p, want := recvPushed(t, toHost), fmt.Sprintf("%d/%d/up/<nil>", wire.ToHostData, id); p.msg != want || p.d != wire.ReliableOrdered {
		t.Fatalf("host was pushed %+v, want %q ReliableOrdered", p, want)
	} else {
		checkArrival(t, tr, p)
	}

	// The host leaves: the relay ends the client's connection, then the
	// host's own closes.
	if err := host.Close(); err != nil {
		t.Fatal(err)
	}
	if p := recvPushed(t, toClient); p.end == nil {
		t.Fatalf("client was pushed %+v after the host left, want the end", p)
	}
	if p := recvPushed(t, toHost); p.end == nil {
		t.Fatalf("host was pushed %+v after it closed, want the end", p)
	}
	_ = cl.CloseNow()
	_ = host.CloseNow()
	select {
	case p := <-toClient:
		t.Fatalf("client was pushed %+v after its end", p)
	case p := <-toHost:
		t.Fatalf("host was pushed %+v after its end", p)
	default:
	}
}

func recvPushed(t *testing.T, c <-chan pushed) pushed {
	t.Helper()
	select {
	case p := <-c:
		return p
	case <-tctx(t).Done():
		t.Fatal(errors.New("nothing pushed within the test's bound"))
		return pushed{}
	}
}
