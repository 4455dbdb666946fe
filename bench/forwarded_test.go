package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestForwardedRun runs the forwarding mode on a tiny load, twice:
// clients reach their rooms through the second relay, the direct run
// reaches the holder, both move traffic both ways, the edge relay's own
// /metrics prove that the forwarded run went through its mesh links and
// the direct one did not, and each run had relay processes of its own.
func TestForwardedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two relay processes and loads them for a few seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, childOptions(Options{
		Rooms: 2, Clients: 2, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Mode: Both, Forwarded: true, Baseline: true, Repeat: 2,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Shape.Kind != "forwarded" || res.Shape.Connections != 6 {
		t.Fatalf("shape %+v, want kind forwarded with 6 connections", res.Shape)
	}
	fw, direct := res.Relay, res.Baseline
	if fw == nil || direct == nil || fw.Server != "forwarded" || direct.Server != "direct" {
		t.Fatalf("sides %+v / %+v, want forwarded and direct", fw, direct)
	}
	for _, s := range []*Side{fw, direct} {
		if s.MsgsPerSec <= 0 || s.P50us <= 0 || s.P99us < s.P50us || s.P999us < s.P99us || s.CPUusPerMsg <= 0 ||
			s.Errors != 0 || s.ServerPID == 0 || s.EdgePID == 0 || s.ServerPID == s.EdgePID || s.RSSEndBytes <= 0 {
			t.Errorf("%s side not sane: %+v", s.Server, s)
		}
		if r := s.BytesPerSec / s.MsgsPerSec; r < 63.9 || r > 64.1 {
			t.Errorf("%s bytes per message = %v, want 64", s.Server, r)
		}
	}
	// Every client was forwarded by relay 2 (its mesh_forwards_total{ok}),
	// and the traffic crossed its links; the direct run never touched it.
	if fw.MeshForwards != 4 || fw.MeshPackets <= 0 {
		t.Errorf("forwarded run: relay 2 forwarded %d connections and %d frames, want 4 and > 0", fw.MeshForwards, fw.MeshPackets)
	}
	if fw.EdgeCPUCores <= 0 || fw.EdgeCPUCores > fw.CPUCores {
		t.Errorf("forwarded run: relay 2 used %v of %v cores", fw.EdgeCPUCores, fw.CPUCores)
	}
	if direct.MeshForwards != 0 || direct.MeshPackets != 0 {
		t.Errorf("direct run went through relay 2: %d connections, %d frames", direct.MeshForwards, direct.MeshPackets)
	}
	if res.RatioMsgs <= 0 || res.RatioCPU <= 0 || res.RatioP99 <= 0 {
		t.Errorf("forwarded/direct ratios missing: %+v", res)
	}
	// Both sides share the relays' processes, so every run gets fresh ones.
	pids := map[int]bool{}
	for _, r := range res.Runs {
		for _, s := range []*Side{r.Relay, r.Baseline} {
			if pids[s.ServerPID] || pids[s.EdgePID] {
				t.Errorf("relay processes reused across runs: %+v", res.Runs)
			}
			pids[s.ServerPID], pids[s.EdgePID] = true, true
		}
	}
	if len(res.Runs) != 2 || len(pids) != 8 {
		t.Errorf("%d runs over %d relay processes, want 2 runs (4 sides) over 8", len(res.Runs), len(pids))
	}
}

func TestForwardedOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{Forwarded: true, Idle: 10},
		{Forwarded: true, BalancerLoad: 1},
		{Forwarded: true, BalancerURL: "http://127.0.0.1:1"},
		{Forwarded: true, Baseline: true, SkipRelay: true},
	} {
		if _, err := o.withDefaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
	if _, err := (Options{Forwarded: true, Baseline: true, Repeat: 3}).withDefaults(); err != nil {
		t.Errorf("forwarded with baseline and repeat: %v", err)
	}
}
