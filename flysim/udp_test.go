//go:build unix

package flysim

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/purrfly/purrfly/internal/clock"
)

// udpPort is the internal port of the test app's UDP service.
const udpPort = 7778

// udpWait bounds every wait of the UDP tests.
const udpWait = 10 * time.Second

// udpConfig is testConfig with a UDP service on udpPort (public port: any)
// and both machines on child:udp, which echoes datagrams.
func udpConfig() *Config {
	cfg := testConfig()
	cfg.Images["child:udp"] = &Image{Command: []string{"{exe}"}, Env: map[string]string{
		"FLYSIM_TEST_CHILD": "1", "CHILD_MODE": "udp-echo", "GORACE": "atexit_sleep_ms=0",
	}}
	web := cfg.Apps[0]
	web.UDP = []*UDPService{{InternalPort: udpPort}}
	web.Env["UDP_PORT"] = "7778"
	for _, m := range web.Machines {
		m.Image = "child:udp"
	}
	return cfg
}

// forwarder is the forwarder of the web app's UDP service.
func forwarder(s *Sim) *udpForwarder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apps["web"].udp[0]
}

func flowCount(f *udpForwarder) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.flows)
}

// hasFlow reports whether the forwarder holds a flow for client c.
func hasFlow(f *udpForwarder, c *net.UDPConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flows[c.LocalAddr().(*net.UDPAddr).AddrPort()] != nil
}

// waitUDP waits (at most udpWait) until cond holds, re-checking at every
// change of the forwarder's flows or serving machine.
func waitUDP(tb testing.TB, f *udpForwarder, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(udpWait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			tb.Fatalf("timed out after %s waiting for %s", udpWait, what)
		}
	}
}

// waitApp waits (at most udpWait) until cond holds, re-checking at every
// change of any machine of app.
func waitApp(tb testing.TB, s *Sim, app, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(udpWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.apps[app].changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			tb.Fatalf("timed out after %s waiting for %s", udpWait, what)
		}
	}
}

// waitServed waits until every machine of web is routable and the UDP
// service is served by want.
func waitServed(tb testing.TB, s *Sim, f *udpForwarder, want string) {
	tb.Helper()
	for _, id := range machineIDs(s, "web") {
		waitApp(tb, s, "web", "machine "+id+" routable", func() bool { return routable(s, "web", id) })
	}
	waitUDP(tb, f, "udp served by "+want, func() bool { return f.serving() == want })
}

// udpClient is a client socket on 127.0.0.1, closed at cleanup.
func udpClient(tb testing.TB) *net.UDPConn {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// publicUDP is the web app's public UDP address, from State.
func publicUDP(tb testing.TB, s *Sim) netip.AddrPort {
	tb.Helper()
	addr := s.State().Apps["web"].UDP["7778"]
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || addr != s.UDPAddr("web", udpPort) {
		tb.Fatalf("public udp address %q (UDPAddr %q): %v", addr, s.UDPAddr("web", udpPort), err)
	}
	return ap
}

// echo sends payload from c to the public address and reads the answer,
// which must come from that same address. It returns the machine that
// answered, the address it saw the datagram come from, and the payload it
// echoed.
func echo(tb testing.TB, c *net.UDPConn, to netip.AddrPort, payload []byte) (id, src string, body []byte) {
	tb.Helper()
	if _, err := c.WriteToUDPAddrPort(payload, to); err != nil {
		tb.Fatal(err)
	}
	return readEcho(tb, c, to)
}

// readEcho reads one echo (waiting at most udpWait) from the public address.
func readEcho(tb testing.TB, c *net.UDPConn, from netip.AddrPort) (id, src string, body []byte) {
	tb.Helper()
	buf := make([]byte, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(udpWait))
	n, got, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		tb.Fatalf("no echo: %v", err)
	}
	if got != from {
		tb.Fatalf("echo came from %s, not the public address %s", got, from)
	}
	head, rest, ok := bytes.Cut(buf[:n], []byte("|"))
	id, src, ok2 := strings.Cut(string(head), " ")
	if !ok || !ok2 {
		tb.Fatalf("echo %q has no machine prefix", buf[:min(n, 80)])
	}
	return id, src, rest
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestUDPOneMachineServesEveryFlow: two clients get their own flows (their
// own address as the machine sees it), answers come from the public
// address, every datagram reaches the one machine serving the app (the edge
// region's), a 60,000-byte datagram passes whole, and State and the table
// name the public address.
func TestUDPOneMachineServesEveryFlow(t *testing.T) {
	s := startSim(t, udpConfig())
	ids := machineIDs(s, "web") // ids[0] in ams (the edge), ids[1] in sea
	f := forwarder(s)
	waitServed(t, s, f, ids[0])
	pub := publicUDP(t, s)

	a, b := udpClient(t), udpClient(t)
	var srcA, srcB string
	for i := range 5 {
		for _, c := range []*net.UDPConn{a, b} {
			msg := []byte("datagram-" + string(rune('0'+i)) + "-" + c.LocalAddr().String())
			id, src, body := echo(t, c, pub, msg)
			if id != ids[0] || !bytes.Equal(body, msg) {
				t.Fatalf("datagram %d of %s: answered by %s with %q", i, c.LocalAddr(), id, body)
			}
			seen := &srcA
			if c == b {
				seen = &srcB
			}
			if *seen != "" && *seen != src {
				t.Fatalf("client %s seen as %s, then as %s: its flow changed", c.LocalAddr(), *seen, src)
			}
			*seen = src
		}
	}
	if srcA == srcB || srcA == a.LocalAddr().String() {
		t.Fatalf("flows: client a seen as %s, b as %s (a is %s); want two flow sockets", srcA, srcB, a.LocalAddr())
	}
	big := make([]byte, 60000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if id, _, body := echo(t, a, pub, big); id != ids[0] || !bytes.Equal(body, big) {
		t.Fatalf("60,000-byte datagram: %d bytes back from %s", len(body), id)
	}
	if n := flowCount(f); n != 2 || gaugeValue(t, f.met.flows) != 2 {
		t.Fatalf("flows = %d (gauge %v), want 2", n, gaugeValue(t, f.met.flows))
	}
	if in, out := counterValue(t, f.met.toMachine), counterValue(t, f.met.toClient); in != 11 || out != 11 {
		t.Fatalf("datagrams to machine %v, to client %v; want 11 and 11", in, out)
	}

	b2, err := json.Marshal(s.State())
	if err != nil || !strings.Contains(string(b2), `"udp":{"7778":"`+pub.String()+`"}`) {
		t.Fatalf("state JSON = %s (%v)", b2, err)
	}
	var table bytes.Buffer
	s.WriteTable(&table)
	if !strings.Contains(table.String(), pub.String()+"->7778*") {
		t.Fatalf("table does not mark the serving machine:\n%s", &table)
	}
}

// TestUDPServingMachineMoves: stopping the serving machine moves every flow
// to the other one (the client keeps its flow); the serving machine is
// sticky when the first comes back; cordoning moves it again.
func TestUDPServingMachineMoves(t *testing.T) {
	s := startSim(t, udpConfig())
	ids := machineIDs(s, "web")
	f := forwarder(s)
	waitServed(t, s, f, ids[0])
	pub := publicUDP(t, s)
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c := udpClient(t)
	id, before, _ := echo(t, c, pub, []byte("before"))
	if id != ids[0] {
		t.Fatalf("served by %s, want %s", id, ids[0])
	}
	if err := fc.Stop(ctx, "web", fly.StopMachineInput{ID: ids[0]}, ""); err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", ids[0], flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitUDP(t, f, "udp served by "+ids[1], func() bool { return f.serving() == ids[1] })
	id, after, body := echo(t, c, pub, []byte("after"))
	if id != ids[1] || after != before || string(body) != "after" {
		t.Fatalf("after the stop: %s saw %s (before: %s) and echoed %q", id, after, before, body)
	}

	// The first machine comes back: the service stays where it is.
	if _, err := fc.Start(ctx, "web", ids[0], ""); err != nil {
		t.Fatal(err)
	}
	waitApp(t, s, "web", "machine "+ids[0]+" routable again", func() bool { return routable(s, "web", ids[0]) })
	if id, _, _ := echo(t, c, pub, []byte("sticky")); id != ids[1] {
		t.Fatalf("after the restart: served by %s, want %s still", id, ids[1])
	}
	// Cordoning the serving machine moves the service back.
	if err := fc.Cordon(ctx, "web", ids[1], ""); err != nil {
		t.Fatal(err)
	}
	waitUDP(t, f, "udp served by "+ids[0], func() bool { return f.serving() == ids[0] })
	if id, _, _ := echo(t, c, pub, []byte("cordoned")); id != ids[0] {
		t.Fatalf("after the cordon: served by %s, want %s", id, ids[0])
	}
	if n := counterValue(t, f.met.switches); n != 3 {
		t.Fatalf("serving changes = %v, want 3", n)
	}
}

// TestUDPMachineNotListening: a serving machine that does not listen on
// UDP (ICMP port unreachable) loses the datagram, not the forwarder or the
// flow; an answer from any other address than a machine's service address
// is dropped.
func TestUDPMachineNotListening(t *testing.T) {
	cfg := udpConfig()
	cfg.Apps[0].Machines[0].Image = "child:v1" // has the service in its config, binds no UDP
	s := startSim(t, cfg)
	ids := machineIDs(s, "web")
	f := forwarder(s)
	waitServed(t, s, f, ids[0])
	pub := publicUDP(t, s)

	c := udpClient(t)
	if _, err := c.WriteToUDPAddrPort([]byte("lost"), pub); err != nil {
		t.Fatal(err)
	}
	waitUDP(t, f, "a flow for the client", func() bool { return flowCount(f) == 1 })
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.Cordon(ctx, "web", ids[0], ""); err != nil {
		t.Fatal(err)
	}
	waitUDP(t, f, "udp served by "+ids[1], func() bool { return f.serving() == ids[1] })
	id, src, _ := echo(t, c, pub, []byte("found"))
	if id != ids[1] || flowCount(f) != 1 {
		t.Fatalf("answered by %s with %d flows; want %s and the same flow", id, flowCount(f), ids[1])
	}

	// A datagram to the flow's socket from elsewhere never reaches the
	// client: the next thing it gets is the machine's echo.
	flow, err := netip.ParseAddrPort(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := udpClient(t).WriteToUDPAddrPort([]byte("forged"), flow); err != nil {
		t.Fatal(err)
	}
	if _, _, body := echo(t, c, pub, []byte("real")); string(body) != "real" {
		t.Fatalf("client got %q", body)
	}
	if n := counterValue(t, f.met.foreign); n != 1 {
		t.Fatalf("foreign datagrams dropped = %v, want 1", n)
	}
}

// TestUDPFlowCapAndIdle: past UDPMaxFlows the flow idle longest ends; flows
// with no datagram for the idle timeout (on the Sim's clock) end.
func TestUDPFlowCapAndIdle(t *testing.T) {
	cfg := udpConfig()
	cfg.Apps[0].Machines = cfg.Apps[0].Machines[:1]
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startSimOpts(t, cfg, Options{Clock: fake, UDPMaxFlows: 2})
	f := forwarder(s)
	waitServed(t, s, f, machineIDs(s, "web")[0])
	pub := publicUDP(t, s)

	c1, c2, c3 := udpClient(t), udpClient(t), udpClient(t)
	_, first1, _ := echo(t, c1, pub, []byte("1"))
	fake.Advance(time.Second)
	_, first2, _ := echo(t, c2, pub, []byte("2"))
	fake.Advance(time.Second)
	if _, again1, _ := echo(t, c1, pub, []byte("1 again")); again1 != first1 {
		t.Fatalf("c1 seen as %s, then %s", first1, again1)
	}
	fake.Advance(time.Second)
	echo(t, c3, pub, []byte("3")) // c2 is the idlest: it goes
	if !hasFlow(f, c1) || hasFlow(f, c2) || !hasFlow(f, c3) || counterValue(t, f.met.evictedEnds) != 1 {
		t.Fatalf("after c3: flows c1 %v c2 %v c3 %v, evicted %v", hasFlow(f, c1), hasFlow(f, c2), hasFlow(f, c3),
			counterValue(t, f.met.evictedEnds))
	}
	fake.Advance(time.Second)
	if _, again2, _ := echo(t, c2, pub, []byte("2 again")); again2 == first2 {
		t.Fatalf("c2 kept its evicted flow %s", first2)
	}
	if hasFlow(f, c1) || !hasFlow(f, c2) || !hasFlow(f, c3) || gaugeValue(t, f.met.flows) != 2 {
		t.Fatalf("after c2 again: flows c1 %v c2 %v c3 %v, gauge %v", hasFlow(f, c1), hasFlow(f, c2), hasFlow(f, c3),
			gaugeValue(t, f.met.flows))
	}

	fake.Advance(DefaultUDPIdleTimeout)
	waitUDP(t, f, "idle flows ended", func() bool { return flowCount(f) == 0 })
	if n, g := counterValue(t, f.met.idleEnds), gaugeValue(t, f.met.flows); n != 2 || g != 0 {
		t.Fatalf("idle ends %v, gauge %v; want 2 and 0", n, g)
	}
}
