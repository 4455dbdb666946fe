//go:build unix

package flysim

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"
)

// TestFaults: a lost update response (the update happens, flaps gets an
// error), an injected error status, and arming a fault over HTTP.
func TestFaults(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].Machines = cfg.Apps[0].Machines[:1]
	s := startSim(t, cfg)
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := machineIDs(s, "web")[0]
	m, err := fc.Get(ctx, "web", id)
	if err != nil {
		t.Fatal(err)
	}

	if err := s.InjectFault(Fault{Action: "update", Machine: id, DropResponse: true}); err != nil {
		t.Fatal(err)
	}
	m.Config.Image = "child:v2"
	if _, err := fc.Update(ctx, "web", fly.LaunchMachineInput{ID: id, Config: m.Config}, ""); err == nil {
		t.Fatal("update answered despite the dropped response")
	}
	got, err := fc.Get(ctx, "web", id)
	if err != nil || got.Config.Image != "child:v2" || got.Version == m.Version {
		t.Fatalf("the lost update was not applied: %+v, %v", got, err)
	}
	if err := fc.Wait(ctx, "web", id, flaps.WithWaitStates("started"), flaps.WithWaitVersion(got.Version), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}

	// Over HTTP: the next get answers 500, the one after is normal.
	req, _ := http.NewRequest(http.MethodPost, s.State().MachinesAPI+"/flysim/v1/faults",
		bytes.NewReader([]byte(`{"action":"get","app":"web","status":500}`)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := httpClient().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("arming a fault over HTTP: %v %v", resp, err)
	}
	resp.Body.Close()
	var ferr *flaps.FlapsError
	if _, err := fc.Get(ctx, "web", id); !errors.As(err, &ferr) || ferr.ResponseStatusCode != http.StatusInternalServerError {
		t.Fatalf("get with an injected 500: %v", err)
	}
	if _, err := fc.Get(ctx, "web", id); err != nil {
		t.Fatalf("the fault outlived its one hit: %v", err)
	}
	if err := s.InjectFault(Fault{Action: "explode", Status: 500}); err == nil {
		t.Fatal("an unknown action was accepted")
	}
}
