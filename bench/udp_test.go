package bench

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// TestRunUDPWithBaseline runs a tiny UDP load both ways against the relay
// child over LiteNetLib and against the UDP echo child with plain sockets.
func TestRunUDPWithBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes and loads them for a few seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, childOptions(Options{
		Rooms: 2, Clients: 2, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Mode: Both, Baseline: true, Transport: client.TransportUDP, Repeat: 2,
	}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Shape struct {
			Transport   string `json:"transport"`
			Delivery    string `json:"delivery"`
			Connections int    `json:"connections"`
		} `json:"shape"`
		RatioMsgs float64 `json:"ratio_msgs"`
		RatioCPU  float64 `json:"ratio_cpu"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if got.Shape.Transport != "udp" || got.Shape.Delivery != "Unreliable" || got.Shape.Connections != 6 {
		t.Errorf("shape %+v, want udp, Unreliable, 6 connections", got.Shape)
	}
	if got.RatioMsgs <= 0 || got.RatioCPU <= 0 {
		t.Errorf("ratios missing: %s", b)
	}
	for _, s := range []*Side{res.Relay, res.Baseline} {
		if s == nil {
			t.Fatalf("a side is missing: %s", b)
		}
		if s.Messages <= 0 || s.Sent <= 0 || s.CPUSeconds <= 0 || s.CPUusPerMsg <= 0 || s.ServerPID == 0 ||
			s.P50us <= 0 || s.P50us > s.P99us || s.P50us > 1e6 || s.Errors != 0 {
			t.Errorf("%s side not sane: %+v", s.Server, s)
		}
		// Unreliable may lose a datagram, never invent one: what arrives
		// in the window was sent in it or in flight at its start (a
		// window of 4 for each of 4 clients, each way).
		if s.Messages > s.Sent+int64(2*DefaultWindow*4) {
			t.Errorf("%s received %d of %d sent", s.Server, s.Messages, s.Sent)
		}
		if r := s.BytesPerSec / s.MsgsPerSec; r < 63.9 || r > 64.1 {
			t.Errorf("%s bytes per message = %v, want 64 (the payload, headers skipped)", s.Server, r)
		}
	}
	if res.Relay.UDPDatagramsIn <= 0 || res.Relay.UDPDatagramsOut <= 0 || res.Baseline.UDPDatagramsIn != 0 {
		t.Errorf("relay datagrams in/out %d/%d (want > 0, read from its /metrics), baseline %d",
			res.Relay.UDPDatagramsIn, res.Relay.UDPDatagramsOut, res.Baseline.UDPDatagramsIn)
	}
	if res.Baseline.Server != "echo" {
		t.Errorf("baseline server %q", res.Baseline.Server)
	}
	// Pooled over both runs: each quantile lies between the two runs'
	// own (within a bucket's rounding).
	p := res.Pooled
	if p == nil || p.Runs != 2 || len(res.Runs) != 2 {
		t.Fatalf("pooled %+v over %d runs, want 2", p, len(res.Runs))
	}
	between := func(what string, got float64, of func(Run1) float64) {
		a, b := of(res.Runs[0]), of(res.Runs[1])
		if got < min(a, b)*0.96 || got > max(a, b)*1.04 {
			t.Errorf("pooled %s %v outside the runs' %v and %v", what, got, a, b)
		}
	}
	between("relay rtt p50", p.RelayRTTP50us, func(r Run1) float64 { return r.Relay.RTTP50us })
	between("relay rtt p99", p.RelayRTTP99us, func(r Run1) float64 { return r.Relay.RTTP99us })
	between("baseline p99", p.BaselineP99us, func(r Run1) float64 { return r.Baseline.P99us })
	// The kernel's arrival stamps (Linux): every message's arrives before
	// the load reads it, so each quantile is at most the read one's; the
	// relay's round trip and its ratio come from them too.
	if runtime.GOOS == "linux" {
		for _, s := range []*Side{res.Relay, res.Baseline} {
			if s.ArrivalP50us <= 0 || s.ArrivalP50us > s.P50us || s.ArrivalP99us < s.ArrivalP50us || s.ArrivalP99us > s.P99us {
				t.Errorf("%s arrival p50 %v p99 %v against read p50 %v p99 %v", s.Server, s.ArrivalP50us, s.ArrivalP99us, s.P50us, s.P99us)
			}
		}
		if p.RelayArrivalRTTP99us <= 0 || p.RelayArrivalRTTP99us > p.RelayRTTP99us || p.RatioArrivalRTTP99 <= 0 {
			t.Errorf("pooled arrival round trip p99 %v against read %v, ratio %v", p.RelayArrivalRTTP99us, p.RelayRTTP99us, p.RatioArrivalRTTP99)
		}
		if r := res.Relay; r.ArrivalRTTP50us <= 0 || r.ArrivalRTTP50us > r.RTTP50us || r.ArrivalRTTP99us > r.RTTP99us || res.RatioArrivalRTTP99 <= 0 {
			t.Errorf("relay arrival round trip p50 %v p99 %v against read %v %v, ratio %v", r.ArrivalRTTP50us, r.ArrivalRTTP99us, r.RTTP50us, r.RTTP99us, res.RatioArrivalRTTP99)
		}
	}
}

func TestIdleUDP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a relay process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, childOptions(Options{Idle: 25, Clients: 4, Duration: 200 * time.Millisecond, Transport: client.TransportUDP}))
	if err != nil {
		t.Fatal(err)
	}
	s := res.Relay
	if res.Shape.Kind != "idle" || res.Shape.Transport != "udp" || res.Shape.Rooms != 5 || s.Connections != 25 {
		t.Fatalf("shape %+v, %d connections; want idle over udp, 5 rooms, 25 connections", res.Shape, s.Connections)
	}
	if s.RSSConnectedBytes <= 0 || s.Messages != 0 {
		t.Errorf("idle side %+v", s)
	}
}

func TestUDPOptionsValidation(t *testing.T) {
	udp := client.TransportUDP
	for _, o := range []Options{
		{Delivery: DeliveryUnreliable}, // WebSocket has no methods
		{Transport: udp, Delivery: "fast"},
		{Transport: 7},
		{Transport: udp, Size: 1018},                                 // Unreliable: one packet
		{Transport: udp, Size: 1015, Delivery: DeliverySequenced},    // one channeled packet
		{Transport: udp, Size: MaxUDPSize + 1, Delivery: "ro"},       // one baseline datagram
		{Transport: udp, Forwarded: true},                            // WebSocket only
		{Transport: udp, Idle: 10, Baseline: true},                   // nothing to compare
		{Transport: udp, Rooms: 3000, Clients: 9},                    // ephemeral ports
		{Transport: udp, Idle: MaxUDPConnections + 1, Clients: 9},    // the same, idle
		{Transport: udp, BalancerLoad: 2, Duration: time.Second},     // no connections
		{Transport: udp, Size: 4, Delivery: DeliveryReliableOrdered}, // below MinSize
	} {
		if _, err := o.withDefaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
	for _, c := range []struct {
		o    Options
		want wire.Delivery
	}{
		{Options{}, wire.ReliableOrdered}, // WebSocket
		{Options{Transport: udp}, wire.Unreliable},
		{Options{Transport: udp, Size: 1017}, wire.Unreliable},
		{Options{Transport: udp, Size: 1014, Delivery: DeliveryReliableSequenced}, wire.ReliableSequenced},
		{Options{Transport: udp, Size: 1024, Delivery: DeliveryReliableOrdered}, wire.ReliableOrdered},
		{Options{Transport: udp, Size: MaxUDPSize, Delivery: DeliveryReliableUnordered}, wire.ReliableUnordered},
	} {
		o, err := c.o.withDefaults()
		if err != nil || o.method != c.want {
			t.Errorf("%+v: method %d, %v; want %d", c.o, o.method, err, c.want)
		}
	}
}

// TestUDPEchoFrameLengths: a baseline datagram is as long as what the
// relay reads for the same message.
func TestUDPEchoFrameLengths(t *testing.T) {
	for _, c := range []struct {
		m       wire.Delivery
		sendOne bool
		want    int
	}{
		{wire.Unreliable, false, 1 + 1 + 100},      // [prop][method][payload]
		{wire.Unreliable, true, 1 + 6 + 100},       // [prop][1][target:4][method][payload]
		{wire.ReliableOrdered, false, 4 + 1 + 100}, // [prop][seq:2][channel][method][payload]
		{wire.ReliableSequenced, true, 4 + 6 + 100},
	} {
		f, off := udpEchoFrame(c.m, c.sendOne, 100)
		if len(f) != c.want || off != c.want-100 {
			t.Errorf("method %d sendOne %v: %d bytes, payload at %d; want %d", c.m, c.sendOne, len(f), off, c.want)
		}
	}
}

// TestUDPEchoAllocatesNothing: one datagram in and out of the echo.
func TestUDPEchoAllocatesNothing(t *testing.T) {
	srv, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := dialUDPEcho(srv.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	msg, buf, back := make([]byte, 102), make([]byte, maxDatagram), make([]byte, 2048)
	// Bound every blocking call: a lost datagram fails the test, not hangs it.
	deadline := time.Now().Add(10 * time.Second)
	_ = srv.SetDeadline(deadline)
	_ = cl.SetDeadline(deadline)
	var failed error
	n := testing.AllocsPerRun(200, func() {
		if _, err := cl.Write(msg); err != nil {
			failed = err
			return
		}
		if rerr, werr := echoDatagram(srv, buf); rerr != nil || werr != nil {
			failed = errors.Join(rerr, werr)
			return
		}
		if k, err := cl.Read(back); err != nil || k != len(msg) {
			failed = errors.Join(err, errors.New("short echo"))
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if n != 0 {
		t.Errorf("echoing a datagram allocates %v", n)
	}
}
