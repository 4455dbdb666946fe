package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/flysim"
)

// onRandomPrefix moves cfg to a random 127.A.B.0/24 (proxies on .1,
// machines from .2, the Machines API and DNS on free ports), so parallel
// test binaries never collide, and returns the prefix ("127.A.B.").
func onRandomPrefix(cfg *flysim.Config) string {
	prefix := fmt.Sprintf("127.%d.%d.", 200+rand.IntN(50), rand.IntN(250))
	cfg.MachinesAPI, cfg.DNS, cfg.MachineIPBase = "127.0.0.1:0", "127.0.0.1:0", prefix+"2"
	for _, a := range cfg.Apps {
		a.Proxy = strings.Replace(a.Proxy, "127.0.0.1:", prefix+"1:", 1)
	}
	return prefix
}

// runSim starts a Sim of cfg within 30 s and closes it when the test
// ends; an error to start (a port another test took) is returned for the
// caller to try another prefix.
func runSim(t *testing.T, cfg *flysim.Config, opts flysim.Options) (*flysim.Sim, error) {
	t.Helper()
	sim, err := flysim.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = sim.Start(ctx)
	cancel()
	if err != nil {
		_ = sim.Close()
		return nil, err
	}
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Errorf("sim close: %v", err)
		}
	})
	return sim, nil
}
