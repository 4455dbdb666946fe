//go:build unix

package flysim

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"

	"github.com/purrfly/purrfly/internal/testutil"
)

// TestHostDown fails the host of a machine that has a standby: the
// process dies without a signal, the machine shows host_status
// unreachable, its address black-holes, the proxy passes it over at
// once, DNS drops it after host_dns_drop, the standby (placed on another
// host) is started; the host returns and the machine boots again.
func TestHostDown(t *testing.T) {
	cfg := testConfig()
	cfg.Platform.HostDNSDrop = Duration{400 * time.Millisecond}
	cfg.Platform.StandbyStart = Duration{100 * time.Millisecond}
	cfg.Apps[0].Machines = cfg.Apps[0].Machines[:1] // one machine in ams
	s := startSim(t, cfg)
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	primary := machineIDs(s, "web")[0]
	before := ping(t, s, "web", primary)
	m, err := fc.Get(ctx, "web", primary)
	if err != nil {
		t.Fatal(err)
	}
	sc := *m.Config
	sc.Standbys = []string{primary}
	standby, err := fc.Launch(ctx, "web", fly.LaunchMachineInput{Region: "ams", Config: &sc, SkipLaunch: true})
	if err != nil {
		t.Fatal(err)
	}
	host := s.MachineHost(primary)
	if h := s.MachineHost(standby.ID); h == host || h == "" {
		t.Fatalf("standby on host %q, its primary on %q: want another host", h, host)
	}

	code, body := apiDoBody(t, s, `{"kind":"host_down","machine":"`+primary+`"}`)
	if code != 200 || !strings.Contains(body, host) || !strings.Contains(body, primary) {
		t.Fatalf("host_down: %d %s", code, body)
	}
	down := time.Now()
	got, err := fc.Get(ctx, "web", primary)
	if err != nil {
		t.Fatal(err)
	}
	if got.HostStatus != fly.HostStatusUnreachable || got.State != StateStarted {
		t.Errorf("failed host's machine: state %s host_status %s, want started/unreachable", got.State, got.HostStatus)
	}
	for _, ev := range got.Events {
		if ev.Type == "exit" {
			t.Errorf("an exit event was recorded for a machine whose host vanished: %+v", ev)
		}
	}
	if routable(s, "web", primary) {
		t.Error("the proxy still routes to a machine on a failed host")
	}
	// The address answers nothing: a request there meets its deadline.
	c, err := net.DialTimeout("tcp", net.JoinHostPort(got.PrivateIP, "8080"), time.Second)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		_, _ = c.Write([]byte("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"))
		n, rerr := c.Read(make([]byte, 64))
		_ = c.Close()
		if ne, ok := rerr.(net.Error); n > 0 || !ok || !ne.Timeout() {
			t.Errorf("the failed host's address answered: %d bytes, %v", n, rerr)
		}
	}
	if _, err := fc.Start(ctx, "web", primary, ""); err == nil {
		t.Error("start of a machine on a failed host succeeded")
	}
	listed := func() bool {
		ms, _ := s.dnsMachines("web")
		return strings.Contains(vmList(filter(ms, func(m dnsMachine) bool { return m.started })), primary)
	}
	testutil.Eventually(t, 5*time.Second, "DNS drops the failed host's machine", func() bool { return !listed() })
	if took := time.Since(down); took < 350*time.Millisecond {
		t.Errorf("DNS dropped the machine after %v, want host_dns_drop (400ms)", took)
	}
	if err := fc.Wait(ctx, "web", standby.ID, flaps.WithWaitStates("started"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatalf("the standby was not started: %v", err)
	}
	pingEventually(t, s, "web", standby.ID, "the standby answers", func(pingInfo) bool { return true })

	if code, body := apiDoBody(t, s, `{"kind":"host_up","host":"`+host+`"}`); code != 200 {
		t.Fatalf("host_up: %d %s", code, body)
	}
	after := pingEventually(t, s, "web", primary, "the machine boots again", func(pingInfo) bool { return true })
	if after.Pid == before.Pid {
		t.Errorf("same process (pid %d) after the host came back, want a new boot", after.Pid)
	}
	got, err = fc.Get(ctx, "web", primary)
	if err != nil {
		t.Fatal(err)
	}
	if got.HostStatus != fly.HostStatusOk || !listed() {
		t.Errorf("after host_up: host_status %s, in DNS %v", got.HostStatus, listed())
	}
	var st struct{ Error string }
	if code, body := apiDoBody(t, s, `{"kind":"host_up","host":"`+host+`"}`); code != 400 || json.Unmarshal([]byte(body), &st) != nil || st.Error == "" {
		t.Errorf("host_up of an up host: %d %s, want 400 with an error", code, body)
	}
}
