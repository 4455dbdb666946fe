package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
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

	// The host streams numbered messages; the client reads the first
	// with Recv and switches halfway through, with messages queued and
	// more arriving. fn holds its first message until the host has sent
	// them all, so that over UDP what arrives meanwhile must queue behind
	// the queue being handed over rather than overtake it: all in order,
	// none twice.
	const streamed = 2000
	sent, half := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(half)
		for i := range streamed {
			if i == streamed/2 {
				half <- struct{}{}
			}
			if err := host.SendOne(tctx(t), id, binary.LittleEndian.AppendUint32(nil, uint32(i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	if got, err := cl.Recv(tctx(t)); err != nil || len(got) != 4 || binary.LittleEndian.Uint32(got) != 0 {
		t.Fatalf("Recv: %x, %v", got, err)
	}
	<-half                                     // most of the first half queued, the rest still to come
	toClient := make(chan pushed, streamed+16) // fn and end must not block
	var first atomic.Bool
	release := make(chan struct{})
	go cl.OnMessage(func(d wire.Delivery, msg []byte, at time.Time) {
		p := pushed{d: d, msg: string(msg), at: at, got: time.Now()}
		if !first.Swap(true) {
			<-release
		}
		toClient <- p
	}, func(err error) { toClient <- pushed{end: err} })
	err = <-sent
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	for want := uint32(1); want < streamed; want++ {
		p := recvPushed(t, toClient)
		if p.end != nil || len(p.msg) != 4 || binary.LittleEndian.Uint32([]byte(p.msg)) != want || p.d != wire.ReliableOrdered {
			t.Fatalf("client was pushed %+v, want message %d ReliableOrdered", p, want)
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

// A UDP connection that ended before OnMessage was called still hands
// over what it had queued, in order, then its end, once.
func TestPushAfterTheEnd(t *testing.T) {
	for _, tr := range []client.Transport{client.TransportUDP, client.TransportUDP1} {
		t.Run(tr.String(), func(t *testing.T) {
			s := startRelay(t, Options{})
			hs, cs := mustAllocate(t, s, "ended")
			capab := udpCap
			if tr == client.TransportUDP1 {
				capab = udp1Cap
			}
			c, o := capab(s, hs)
			host, err := client.DialHost(tctx(t), c, "ended", o)
			if err != nil {
				t.Fatal(err)
			}
			defer host.CloseNow()
			c, o = capab(s, cs)
			cl, err := client.DialClient(tctx(t), c, "ended", o)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.CloseNow()
			id := nextOfType(t, host, wire.ToHostConnected).IDs[0]
			for _, m := range []string{"a", "b", "c"} {
				if err := host.SendOne(tctx(t), id, []byte(m)); err != nil {
					t.Fatal(err)
				}
			}
			if err := host.Close(); err != nil { // the relay then ends the client's connection
				t.Fatal(err)
			}
			waitFor(t, "the client's connection to end", func() bool {
				return cl.SendWith(tctx(t), wire.Unreliable, []byte("x")) != nil
			})
			got := make(chan pushed, 16)
			cl.OnMessage(func(d wire.Delivery, msg []byte, _ time.Time) { got <- pushed{d: d, msg: string(msg)} },
				func(err error) { got <- pushed{end: err} })
			for _, want := range []string{"a", "b", "c"} {
				if p := recvPushed(t, got); p.end != nil || p.msg != want {
					t.Fatalf("pushed %+v, want %q", p, want)
				}
			}
			if p := recvPushed(t, got); !errors.Is(p.end, client.ErrDisconnected) {
				t.Fatalf("pushed %+v, want the end", p)
			}
			_ = cl.CloseNow() // a second end would be handed over here, synchronously
			select {
			case p := <-got:
				t.Fatalf("pushed %+v after the end", p)
			default:
			}
		})
	}
}
