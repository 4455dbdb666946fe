package bench

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
)

func TestRunWithBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes and loads them for a few seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, childOptions(Options{
		Rooms: 2, Clients: 2, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Mode: Both, Baseline: true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	// The JSON contract of `purrctl bench --json`.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Relay     map[string]any `json:"relay"`
		Baseline  map[string]any `json:"baseline"`
		RatioMsgs float64        `json:"ratio_msgs"`
		RatioCPU  float64        `json:"ratio_cpu"`
		Shape     struct {
			Connections int `json:"connections"`
		} `json:"shape"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if got.Shape.Connections != 6 {
		t.Errorf("shape.connections = %d, want 6 (2 rooms of 1 host + 2 clients)", got.Shape.Connections)
	}
	for name, raw := range map[string]map[string]any{"relay": got.Relay, "baseline": got.Baseline} {
		side := map[string]float64{}
		for k, v := range raw {
			if f, ok := v.(float64); ok {
				side[k] = f
			}
		}
		for _, k := range []string{"msgs_per_sec", "bytes_per_sec", "p50_us", "p99_us", "cpu_us_per_msg", "rss_end_bytes", "server_pid"} {
			if side[k] <= 0 {
				t.Errorf("%s.%s = %v, want > 0 (%s)", name, k, side[k], b)
			}
		}
		if side["p50_us"] > side["p99_us"] || side["p99_us"] > side["p999_us"] {
			t.Errorf("%s quantiles out of order: %s", name, b)
		}
		// Sanity: 64-byte payloads, so bytes/s is 64 x msgs/s.
		if r := side["bytes_per_sec"] / side["msgs_per_sec"]; r < 63.9 || r > 64.1 {
			t.Errorf("%s bytes per message = %v, want 64", name, r)
		}
		// A message on loopback takes far less than a second.
		if side["p50_us"] > 1e6 {
			t.Errorf("%s p50 = %v us", name, side["p50_us"])
		}
		if side["errors"] != 0 {
			t.Errorf("%s had %v errors during the window", name, side["errors"])
		}
	}
	if got.RatioMsgs <= 0 || got.RatioCPU <= 0 {
		t.Errorf("ratios missing: %s", b)
	}
	// Both directions loaded: the relay's round trip, two crossings,
	// against the echo's one.
	if res.Relay.RTTP99us < res.Relay.P99us || res.Relay.RTTP50us < res.Relay.P50us || res.Relay.RTTP50us > res.Relay.RTTP99us ||
		res.Baseline.RTTP99us != 0 || res.RatioRTTP99 <= 0 {
		t.Errorf("round trip p50 %v p99 %v (one crossing %v, %v), baseline %v, ratio %v", res.Relay.RTTP50us, res.Relay.RTTP99us,
			res.Relay.P50us, res.Relay.P99us, res.Baseline.RTTP99us, res.RatioRTTP99)
	}
	// WebSocket has no arrival stamps: only read latencies.
	if res.Relay.ArrivalP50us != 0 || res.Baseline.ArrivalP50us != 0 || res.RatioArrivalRTTP99 != 0 {
		t.Errorf("arrival latencies over WebSocket: relay %v, baseline %v, ratio %v", res.Relay.ArrivalP50us, res.Baseline.ArrivalP50us, res.RatioArrivalRTTP99)
	}
	// Each direction's own p99: the one-crossing p99 lies between them.
	lo, hi := min(res.Relay.ToHostP99us, res.Relay.ToClientP99us), max(res.Relay.ToHostP99us, res.Relay.ToClientP99us)
	if lo <= 0 || res.Relay.P99us < lo || res.Relay.P99us > hi || hi > res.Relay.RTTP99us {
		t.Errorf("crossing p99s: to host %v, to client %v; both directions %v; round trip %v",
			res.Relay.ToHostP99us, res.Relay.ToClientP99us, res.Relay.P99us, res.Relay.RTTP99us)
	}
	// The relay's write path, read from its /metrics: frames its readers
	// wrote themselves and its writers' batches; the echo has none.
	if n := res.Relay.DirectFrames + res.Relay.WriteBatches; n <= 0 {
		t.Errorf("relay direct_frames + write_batches = %d, want > 0", n)
	}
	if res.Baseline.DirectFrames != 0 || res.Baseline.WriteBatches != 0 {
		t.Errorf("baseline write path %d / %d, want none", res.Baseline.DirectFrames, res.Baseline.WriteBatches)
	}
}

func TestIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a relay process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, childOptions(Options{Idle: 25, Clients: 4, Duration: 200 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	s := res.Relay
	if res.Shape.Kind != "idle" || res.Shape.Rooms != 5 || s.Connections != 25 {
		t.Fatalf("shape %+v, %d connections; want idle, 5 rooms, 25 connections", res.Shape, s.Connections)
	}
	if s.RSSConnectedBytes <= 0 || s.RSSPerConnBytes == 0 || s.Messages != 0 {
		t.Errorf("idle side %+v", s)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{Size: 4}, {Mode: "sideways"}, {Rate: -1}, {SkipRelay: true}, {ServerPID: 1}, {Idle: MaxConnections + 1},
		{RelayFlush: time.Millisecond}, {Transport: client.TransportUDP, RelayFlush: 1500 * time.Microsecond},
	} {
		if _, err := o.withDefaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
	o, err := Options{Idle: 10_000, Clients: 9}.withDefaults()
	if err != nil || o.Rooms != 1000 || o.clientsIn(999) != 9 {
		t.Errorf("idle 10,000 in rooms of 10: rooms %d, last room %d clients, %v", o.Rooms, o.clientsIn(999), err)
	}
	o, _ = Options{Idle: 25, Clients: 4}.withDefaults()
	if o.Rooms != 5 || o.clientsIn(4) != 4 {
		t.Errorf("idle 25 in rooms of 5: %d rooms", o.Rooms)
	}
	o, _ = Options{Idle: 7, Clients: 4}.withDefaults()
	if o.Rooms != 2 || o.clientsIn(0) != 4 || o.clientsIn(1) != 1 {
		t.Errorf("idle 7 in rooms of 5: %d rooms, last %d clients", o.Rooms, o.clientsIn(1))
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := int64(1); i <= 100_000; i++ {
		h.record(i * 1000) // 1 us .. 100 ms, uniform
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {0.999, 99900 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.035 || d > 0.035 {
			t.Errorf("q%v = %v, want %v within 3.5%%", c.q, got, c.want)
		}
	}
	if h.quantile(1) != 100*time.Millisecond {
		t.Errorf("max = %v", h.quantile(1))
	}
	var small histogram
	small.record(7)
	if small.quantile(0.5) != 7 {
		t.Errorf("exact small value: %v", small.quantile(0.5))
	}
	var a, b histogram
	a.record(10)
	b.record(1_000_000)
	a.merge(&b)
	if a.n != 2 || a.quantile(1) != time.Millisecond {
		t.Errorf("merge: n=%d max=%v", a.n, a.quantile(1))
	}
}

// TestHistogramConvolve: two independent crossings add up: 1 ms always
// and then 1 or 3 ms (even odds) is 2 or 4 ms; 10 uniform delays of 1 to
// 10 ms twice over make a triangle whose p99 is 19 ms.
func TestHistogramConvolve(t *testing.T) {
	var one, oneOrThree histogram
	one.record(int64(time.Millisecond))
	oneOrThree.record(int64(time.Millisecond))
	oneOrThree.record(int64(3 * time.Millisecond))
	sum := one.convolve(&oneOrThree)
	if sum.n != 2 || sum.quantile(1) != 4*time.Millisecond {
		t.Fatalf("n %d, max %v, want 2 and 4ms", sum.n, sum.quantile(1))
	}
	near := func(got, want time.Duration) bool {
		d := float64(got-want) / float64(want)
		return d > -0.035 && d < 0.035
	}
	if got := sum.quantile(0.25); !near(got, 2*time.Millisecond) {
		t.Errorf("q0.25 %v, want 2ms", got)
	}
	var u histogram
	for i := range 10 {
		u.record(int64(i+1) * int64(time.Millisecond))
	}
	if got := u.convolve(&u).quantile(0.99); !near(got, 19*time.Millisecond) {
		t.Errorf("p99 of two uniform crossings %v, want 19ms", got)
	}
}

func TestRecordAllocatesNothing(t *testing.T) {
	var h histogram
	if n := testing.AllocsPerRun(1000, func() { h.record(12345) }); n != 0 {
		t.Errorf("record allocates %v", n)
	}
}

func TestBalancerLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a balancer and a relay process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A pair is a few milliseconds on a quiet machine; the window is long
	// enough for several on one loaded by other suites (a 0.5 s window
	// once saw none in CI).
	res, err := Run(ctx, childOptions(Options{BalancerLoad: 2, Duration: 2 * time.Second, Warmup: 200 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	b := res.Balancer
	if res.Shape.Kind != "balancer" || b == nil || b.Messages == 0 || b.MsgsPerSec <= 0 || b.P99us <= 0 || b.Errors != 0 || b.ServerPID == 0 {
		t.Fatalf("balancer result %+v %+v", res.Shape, b)
	}
}

func TestBalancerLoadAgainstFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a balancer, a relay and a floor process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Two repetitions, so each side goes first once; MaxMessages bounds
	// every run's pairs (a few seconds' worth on a quiet machine). An
	// event stream is watched on the balancer, as a dashboard would.
	res, err := Run(ctx, childOptions(Options{
		BalancerLoad: 2, Baseline: true, Repeat: 2, MaxMessages: 20_000,
		Duration: time.Second, Warmup: 200 * time.Millisecond, WatchEvents: true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Shape.Kind != "balancer" || res.Shape.Repeat != 2 || len(res.Runs) != 2 {
		t.Fatalf("shape %+v, %d runs; want the balancer mode, 2 repetitions", res.Shape, len(res.Runs))
	}
	for name, s := range map[string]*Side{"balancer": res.Balancer, "floor": res.Baseline} {
		if s == nil || s.Server != name || s.Messages == 0 || s.Errors != 0 || s.CPUusPerMsg <= 0 || s.P99us <= 0 || s.ServerPID == 0 {
			t.Errorf("%s side %+v", name, s)
		}
	}
	if res.Balancer.Events <= 0 || res.Baseline.Events != 0 {
		t.Errorf("events read: balancer %d, floor %d; want some from the balancer's stream only", res.Balancer.Events, res.Baseline.Events)
	}
	if res.Balancer.ServerPID == res.Baseline.ServerPID {
		t.Errorf("the balancer and the floor ran in one process (%d)", res.Balancer.ServerPID)
	}
	if res.RatioCPUPerPair <= 0 || res.RatioMsgs <= 0 || res.RatioCPU != 0 {
		t.Errorf("ratios: cpu per pair %v, pairs/s %v, ratio_cpu %v", res.RatioCPUPerPair, res.RatioMsgs, res.RatioCPU)
	}
	for i, r := range res.Runs {
		if r.Balancer == nil || r.Baseline == nil || r.RatioCPUPerPair <= 0 {
			t.Errorf("run %d: %+v", i, r)
		}
	}
}

func TestBalancerModeOptions(t *testing.T) {
	for _, o := range []Options{
		{CPUProfile: "/tmp/x", Idle: 10},                   // profiles are for a balancer-mode or traffic run
		{BalancerLoad: 2, SkipRelay: true, Baseline: true}, // the floor alone measures nothing
	} {
		if _, err := o.withDefaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
	o, err := Options{BalancerLoad: 2, Baseline: true, Repeat: 3}.withDefaults()
	if err != nil || o.Repeat != 3 {
		t.Errorf("the floor repeats: repeat %d, %v", o.Repeat, err)
	}
}
