//go:build unix

package flysim

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
)

// TestCreateDestroyFollowAndMetadata: a machine created in a running app
// takes the app's traffic as Fly gives it (the proxy balances onto it once
// its checks pass, DNS lists it); the metadata it was created with is
// stored and returned, and changed key by key without a new version or a
// restart; when the machine serving the app's UDP is destroyed another one
// serves it and DNS drops it; a machine whose process exits by itself
// under on-failure stays stopped when it exited 0 and is started again
// when it failed.
func TestCreateDestroyFollowAndMetadata(t *testing.T) {
	s := startSim(t, udpConfig())
	ids := machineIDs(s, "web")
	f := forwarder(s)
	waitServed(t, s, f, ids[0])
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	old, err := fc.Get(ctx, "web", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	cfg := old.Config
	cfg.Metadata["purrfly_role"] = "replacement"
	cfg.Restart = &fly.MachineRestart{Policy: fly.MachineRestartPolicyOnFailure}
	m, err := fc.Launch(ctx, "web", fly.LaunchMachineInput{Region: "ams", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("started"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitApp(t, s, "web", "the new machine routable", func() bool { return routable(s, "web", m.ID) })
	if st, body := get(t, s.AppURL("web")+"/ping", map[string]string{"fly-prefer-instance-id": m.ID}); st != http.StatusOK || !contains(body, m.ID) {
		t.Fatalf("a request preferring the new machine: %d %s", st, body)
	}
	if dns, _ := s.liveDNSMachines("web"); !slices.ContainsFunc(dns, func(d dnsMachine) bool { return d.id == m.ID && d.started }) {
		t.Fatalf("DNS does not list the new machine started: %+v", dns)
	}

	md, err := fc.GetMetadata(ctx, "web", m.ID)
	if err != nil || md["purrfly_role"] != "replacement" || md["fly_process_group"] == "" {
		t.Fatalf("metadata of a machine created with some: %v %v", md, err)
	}
	boot := ping(t, s, "web", m.ID).Boot
	if err := fc.SetMetadata(ctx, "web", m.ID, "purrfly_role", "retiring"); err != nil {
		t.Fatal(err)
	}
	if err := fc.DeleteMetadata(ctx, "web", m.ID, "nothing_there"); err != nil {
		t.Fatalf("deleting a key that is not there: %v", err)
	}
	got, err := fc.Get(ctx, "web", m.ID)
	if err != nil || got.Config.Metadata["purrfly_role"] != "retiring" || got.Version != m.Version {
		t.Fatalf("after SetMetadata: metadata %v, version %s (was %s), %v", got.Config.Metadata, got.Version, m.Version, err)
	}
	if err := fc.DeleteMetadata(ctx, "web", m.ID, "purrfly_role"); err != nil {
		t.Fatal(err)
	}
	if md, _ := fc.GetMetadata(ctx, "web", m.ID); md["purrfly_role"] != "" {
		t.Fatalf("after DeleteMetadata: %v", md)
	}
	if p := ping(t, s, "web", m.ID); p.Boot != boot {
		t.Fatal("a metadata change restarted the machine")
	}
	if st, body := apiDo(t, s, http.MethodPost, "/v1/apps/web/machines/"+m.ID+"/metadata/bad%20key", testToken, nil); st != http.StatusBadRequest {
		t.Fatalf("a bad metadata key: %d %v", st, body)
	}

	// The machine serving UDP goes: the new one (same edge region) serves.
	if err := fc.Destroy(ctx, "web", fly.RemoveMachineInput{ID: ids[0], Kill: true}, ""); err != nil {
		t.Fatal(err)
	}
	waitUDP(t, f, "udp served by the new machine", func() bool { return f.serving() == m.ID })
	c := udpClient(t)
	if id, _, _ := echo(t, c, publicUDP(t, s), []byte("hi")); id != m.ID {
		t.Fatalf("udp served by %s after the destroy, want %s", id, m.ID)
	}
	waitApp(t, s, "web", "DNS to drop the destroyed machine", func() bool {
		dns, _ := s.liveDNSMachines("web")
		return !slices.ContainsFunc(dns, func(d dnsMachine) bool { return d.id == ids[0] })
	})

	// on-failure: a failed exit restarts, a clean one stays stopped.
	exit := func(code string) {
		st, _ := get(t, s.AppURL("web")+"/exit?code="+code, map[string]string{"fly-force-instance-id": m.ID})
		_ = st // the process exits while answering
	}
	before := ping(t, s, "web", m.ID)
	exit("3")
	pingEventually(t, s, "web", m.ID, "a new process after a failed exit", func(p pingInfo) bool { return p.Pid != before.Pid })
	exit("0")
	if err := fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("stopped"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// An automatic restart would start it within its first back-off (100 ms).
	if err := fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("starting", "started"), flaps.WithWaitTimeout(time.Second)); err == nil {
		t.Fatal("a clean exit under on-failure was started again")
	}
	waitUDP(t, f, "udp served by the remaining machine", func() bool { return f.serving() == ids[1] })
}

func contains(b []byte, s string) bool {
	var p pingInfo
	return json.Unmarshal(b, &p) == nil && p.MachineID == s
}
