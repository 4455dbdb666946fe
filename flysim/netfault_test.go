//go:build unix

package flysim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
)

// TestSignalAndRestartPolicy: flaps' Kill (POST .../signal) SIGKILLs the
// process group; with restart policy "always" the machine comes back as a
// new process, with an exit event that is not a requested stop; with no
// policy it stays stopped; a stop request is never undone by the policy.
func TestSignalAndRestartPolicy(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].RestartPolicy = "always"
	s := startSim(t, cfg)
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := machineIDs(s, "web")[0]
	before := ping(t, s, "web", id)

	if err := fc.Kill(ctx, "web", id); err != nil {
		t.Fatalf("kill: %v", err)
	}
	after := pingEventually(t, s, "web", id, "a new process after the kill", func(p pingInfo) bool { return p.Pid != before.Pid })
	if after.Boot == before.Boot {
		t.Fatal("same boot after a restart")
	}
	m, err := fc.Get(ctx, "web", id)
	if err != nil {
		t.Fatal(err)
	}
	var exit *fly.MachineExitEvent
	for _, e := range m.Events {
		if e.Type == "exit" && e.Request != nil && e.Request.ExitEvent != nil {
			exit = e.Request.ExitEvent
			break
		}
	}
	if exit == nil || exit.Signal != 9 || exit.RequestedStop {
		t.Fatalf("exit event after the kill = %+v, want signal 9, not requested", exit)
	}

	// A stop is a stop, whatever the policy.
	if err := fc.Stop(ctx, "web", fly.StopMachineInput{ID: id}, ""); err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", id, flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st, _ := apiDo(t, s, http.MethodPost, "/v1/apps/web/machines/"+id+"/signal", testToken, nil); st != http.StatusBadRequest {
		t.Fatalf("signal without a body: %d, want 400", st)
	}

	// Without a policy a killed machine stays stopped.
	otherID := machineIDs(s, "web")[1]
	s.mu.Lock()
	other := s.apps["web"].machines[otherID]
	other.config.Restart = nil
	s.mu.Unlock()
	if err := fc.Kill(ctx, "web", other.id); err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", other.id, flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatalf("a killed machine without a restart policy: %v", err)
	}
}

// TestLinkFaults: a link passes requests to its app; delayed, it answers
// no sooner than the delay; partitioned, a request waits until the
// partition ends; dropped, a request fails at once; healed, it passes.
func TestLinkFaults(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].Machines = cfg.Apps[0].Machines[:1]
	cfg.Links = []*LinkConfig{{Name: "to-web", App: "web"}}
	s := startSim(t, cfg)
	u := s.LinkURL("to-web")
	if u == "" {
		t.Fatal("no link URL")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	call := func() (time.Duration, error) {
		start := time.Now()
		resp, err := hc.Get(u + "/ping")
		if err != nil {
			return time.Since(start), err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"app":"web"`) {
			t.Fatalf("through the link: %d %s", resp.StatusCode, b)
		}
		return time.Since(start), nil
	}
	if _, err := call(); err != nil {
		t.Fatalf("healthy link: %v", err)
	}
	if err := s.InjectNetFault(NetFault{Kind: NetLinkDelay, Link: "to-web", DelayMS: 300, DurationMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	if d, err := call(); err != nil || d < 300*time.Millisecond {
		t.Fatalf("delayed link: %v after %v, want >= 300ms", err, d)
	}
	if err := s.InjectNetFault(NetFault{Kind: NetLinkPartition, Link: "to-web", DurationMS: 700}); err != nil {
		t.Fatal(err)
	}
	if d, err := call(); err != nil || d < 600*time.Millisecond {
		t.Fatalf("partitioned link: %v after %v, want an answer once it ends", err, d)
	}
	if err := s.InjectNetFault(NetFault{Kind: NetLinkDrop, Link: "to-web", DurationMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(); err == nil {
		t.Fatal("a dropped link answered")
	}
	// Over the control route, as purrctl chaos sends it.
	if st, out := apiDoBody(t, s, `{"kind":"heal","link":"to-web"}`); st != http.StatusOK {
		t.Fatalf("heal: %d %v", st, out)
	}
	if _, err := call(); err != nil {
		t.Fatalf("healed link: %v", err)
	}
	if st, _ := apiDoBody(t, s, `{"kind":"link_drop","link":"nope","duration_ms":10}`); st != http.StatusBadRequest {
		t.Fatalf("unknown link: %d, want 400", st)
	}
}

// TestDNSStale: a stale fault keeps answering the machine set of its
// injection while a machine stops, then answers live again.
func TestDNSStale(t *testing.T) {
	s := startSim(t, testConfig())
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := machineIDs(s, "web")
	if err := s.InjectNetFault(NetFault{Kind: NetDNSStale, App: "web", DurationMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	if err := fc.Stop(ctx, "web", fly.StopMachineInput{ID: ids[1]}, ""); err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", ids[1], flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	vms := func() string {
		ms, _ := s.dnsMachines("web")
		return vmList(filter(ms, func(m dnsMachine) bool { return m.started }))
	}
	if got := vms(); !strings.Contains(got, ids[1]) {
		t.Fatalf("stale answer %q lost the stopped machine", got)
	}
	if err := s.InjectNetFault(NetFault{Kind: NetHeal, App: "web"}); err != nil {
		t.Fatal(err)
	}
	if got := vms(); strings.Contains(got, ids[1]) || !strings.Contains(got, ids[0]) {
		t.Fatalf("live answer %q after heal", got)
	}
}

// apiDoBody posts body to the fault control route.
func apiDoBody(tb testing.TB, s *Sim, body string) (int, string) {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.State().MachinesAPI+"/flysim/v1/faults", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := httpClient().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
