package bench

import (
	"strings"
	"testing"
	"time"
)

// TestWriteText: the terminal report says the shape, one line per side
// with its figures, and the ratios, for traffic and for the balancer mode.
func TestWriteText(t *testing.T) {
	var b strings.Builder
	r := &Result{
		Shape:     Shape{Kind: "traffic", Transport: "udp", Delivery: "Unreliable", Mode: Both, Rooms: 2, Clients: 3, Connections: 8, Size: 100, Rate: 30, DurationSec: 10, WarmupSec: 2},
		Relay:     &Side{Server: "relay", MsgsPerSec: 1234, P99us: 456, CPUusPerMsg: 9.5, RTTP50us: 700, RTTP99us: 900, MachineBusy: 0.94, CPUSaturated: true},
		Baseline:  &Side{Server: "echo", MsgsPerSec: 1200, P99us: 400, CPUusPerMsg: 10},
		RatioMsgs: 1.028, RatioCPU: 1.053, RatioP99: 1.14, RatioRTTP99: 2.25,
	}
	r.WriteText(&b)
	for _, want := range []string{
		"both over udp (Unreliable): 2 rooms x 3 clients (8 connections), 100-byte payloads, open loop, 30 msg/s per client",
		"a plain UDP echo", "relay             1234", "echo              1200",
		"relay/baseline: msgs/s 1.028  msgs per CPU-s 1.053  p99 1.140",
		"relay round trip p99 / baseline p99 (two crossings against one): 2.250",
		"client to host and back, p50 700 us, p99 900 us",
		"the machine's CPUs were 94% busy",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	r.PooledMissing = "run 2 has no round trips"
	r.WriteText(&b)
	if !strings.Contains(b.String(), "(no figures over every message: run 2 has no round trips)") {
		t.Errorf("the report hides why nothing was pooled:\n%s", b.String())
	}
	b.Reset()
	(&Result{Shape: Shape{Kind: "balancer", Workers: 4, DurationSec: 5}, Balancer: &Side{Server: "balancer", MsgsPerSec: 5000},
		Baseline: &Side{Server: "floor", MsgsPerSec: 6000}, RatioMsgs: 0.833, RatioCPUPerPair: 1.2, RatioP99: 1.1}).WriteText(&b)
	if s := b.String(); !strings.Contains(s, "balancer: 4 workers allocate+join fresh rooms") || !strings.Contains(s, "balancer/floor: pairs/s 0.833  CPU per pair 1.200") {
		t.Errorf("balancer report:\n%s", s)
	}
}

// A window is saturated at 90% of every CPU's time busy, the share of the
// window's CPU time on the machine's CPUs.
func TestBusyShare(t *testing.T) {
	for _, tc := range []struct {
		busy    time.Duration
		seconds float64
		cpus    int
		share   float64
		sat     bool
	}{
		{18 * time.Second, 10, 2, 0.9, true},
		{17 * time.Second, 10, 2, 0.85, false},
		{4 * time.Second, 2, 1, 2, true}, // counted on a bigger machine: still saturated
		{0, 10, 2, 0, false},             // /proc/stat unread
	} {
		if share, sat := busyShare(tc.busy, tc.seconds, tc.cpus); share != tc.share || sat != tc.sat {
			t.Errorf("busyShare(%v, %v, %d) = %v, %v; want %v, %v", tc.busy, tc.seconds, tc.cpus, share, sat, tc.share, tc.sat)
		}
	}
}
