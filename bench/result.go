package bench

import (
	"runtime"
	"slices"
	"time"
)

// Result is what Run reports; `purrctl bench --json` prints it as is.
type Result struct {
	Shape    Shape `json:"shape"`
	Relay    *Side `json:"relay,omitempty"`
	Baseline *Side `json:"baseline,omitempty"`
	// Balancer is the balancer mode's result: messages are allocate+join
	// pairs, latencies those of a pair, CPU the balancer process's. With
	// a baseline, Baseline is the floor's (Server "floor"), and the
	// ratios read balancer/floor: RatioMsgs, RatioP99 and
	// RatioCPUPerPair.
	Balancer *Side `json:"balancer,omitempty"`
	// Soak is the connection soak's report.
	Soak *SoakResult `json:"soak,omitempty"`
	// RatioMsgs is relay/baseline forwarded messages per second (>= 1: the
	// relay moves at least as many messages as the echo server). In the
	// forwarding mode (Shape.Kind "forwarded") Relay is the forwarded run
	// and Baseline the direct one, so every ratio reads forwarded/direct.
	RatioMsgs float64 `json:"ratio_msgs,omitempty"`
	// RatioCPU is relay/baseline messages per CPU second, i.e.
	// baseline.cpu_us_per_msg / relay.cpu_us_per_msg (>= 1: the relay
	// spends no more CPU per message than the echo server).
	RatioCPU float64 `json:"ratio_cpu,omitempty"`
	// RatioCPUPerPair is the balancer mode's balancer/floor CPU per
	// allocate+join pair: how many times the floor's CPU the balancer
	// spends on a pair (1: at the floor; lower is better, unlike
	// RatioCPU, which the balancer mode leaves out).
	RatioCPUPerPair float64 `json:"ratio_cpu_per_pair,omitempty"`
	// RatioP99 is relay/baseline p99 latency (<= 1: the relay is no slower).
	RatioP99 float64 `json:"ratio_p99,omitempty"`
	// RatioRTTP99 is, with both directions loaded (Mode both), the relay's
	// round trip p99 (Side.RTTP99us, two crossings) over the baseline's p99
	// (its round trip, one crossing): under 2, a game's round trip through
	// the relay takes less than twice what one through the echo does.
	RatioRTTP99 float64 `json:"ratio_rtt_p99,omitempty"`
	// RatioArrivalRTTP99 is RatioRTTP99 from the kernel's arrival stamps
	// (Side.ArrivalRTTP99us over the baseline's ArrivalP99us): the load
	// generator's scheduling left out of both.
	RatioArrivalRTTP99 float64 `json:"ratio_arrival_rtt_p99,omitempty"`
	// RatioRSSPerConn is relay/baseline memory per connection.
	RatioRSSPerConn float64 `json:"ratio_rss_per_conn,omitempty"`
	// Runs holds every repetition when Repeat > 1 (Relay and Baseline are
	// then their medians).
	Runs []Run1 `json:"runs,omitempty"`
	// Pooled is, with Repeat > 1, a baseline and both directions loaded,
	// the round trips' quantiles over every message of every run
	// (pooled.go).
	Pooled *Pooled `json:"pooled,omitempty"`
	// PooledMissing says why runs of both sides gave no Pooled.
	PooledMissing string `json:"pooled_missing,omitempty"`
}

// Shape is the load of the run, the same for the relay and the baseline.
type Shape struct {
	Kind string `json:"kind"` // "traffic", "idle", "balancer" or "forwarded"
	// Transport is "ws" or "udp" (LiteNetLib 2.x); Delivery, over UDP,
	// LiteNetLib's name of the method the messages went with
	// ("Unreliable", "ReliableOrdered", ...).
	Transport   string  `json:"transport,omitempty"`
	Delivery    string  `json:"delivery,omitempty"`
	Mode        Mode    `json:"mode,omitempty"`
	Rooms       int     `json:"rooms"`
	Clients     int     `json:"clients_per_room"`
	Connections int     `json:"connections"`
	Size        int     `json:"size_bytes,omitempty"`
	Rate        float64 `json:"rate_per_client,omitempty"` // 0 = closed loop
	Window      int     `json:"window,omitempty"`          // closed loop in flight per client
	DurationSec float64 `json:"duration_sec"`
	WarmupSec   float64 `json:"warmup_sec,omitempty"`
	CPUs        int     `json:"cpus"`
	Balancer    string  `json:"balancer"` // "in-process" or the URL
	Repeat      int     `json:"repeat"`
	Workers     int     `json:"workers,omitempty"` // balancer mode: concurrent allocate+join loops
}

// Side is one server's numbers. CPU and memory are the server process's
// (0 when it was not measured: an external balancer without ServerPID).
type Side struct {
	// Server is "relay" or "echo"; in the forwarding mode "forwarded" or
	// "direct", whose CPU and memory figures are the sum of both relay
	// processes (the holder, ServerPID, and the edge, EdgePID).
	Server    string `json:"server"`
	ServerPID int    `json:"server_pid,omitempty"`
	EdgePID   int    `json:"edge_pid,omitempty"`

	Messages    int64   `json:"messages,omitempty"` // received in the measured window
	Seconds     float64 `json:"seconds"`
	MsgsPerSec  float64 `json:"msgs_per_sec"`
	BytesPerSec float64 `json:"bytes_per_sec"` // payload bytes received (size per message)
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	// RTTP50us and RTTP99us are, when both directions are loaded through
	// the relay (Mode both), the p50 and p99 of a round trip: a client's
	// message to its host and a host's to that client, the two measured
	// crossings taken as independent (their distributions convolved). A
	// message's latency (P50us...) is one crossing.
	RTTP50us float64 `json:"rtt_p50_us,omitempty"`
	RTTP99us float64 `json:"rtt_p99_us,omitempty"`
	// ToHostP99us and ToClientP99us are the round trip's two crossings'
	// own p99s (a client's message to its host; the host's to a client).
	ToHostP99us   float64 `json:"to_host_p99_us,omitempty"`
	ToClientP99us float64 `json:"to_client_p99_us,omitempty"`
	// ArrivalP50us... are the same latencies ending where the kernel
	// stamped each datagram's arrival on the load's socket instead of
	// where the load's goroutine read it (UDP, Linux): the server and the
	// network without the load generator's own scheduling, which a busy
	// load adds to every message it reads. Zero where there are no stamps.
	ArrivalP50us    float64 `json:"arrival_p50_us,omitempty"`
	ArrivalP99us    float64 `json:"arrival_p99_us,omitempty"`
	ArrivalRTTP50us float64 `json:"arrival_rtt_p50_us,omitempty"`
	ArrivalRTTP99us float64 `json:"arrival_rtt_p99_us,omitempty"`
	MaxUs           float64 `json:"max_us"`
	Sent            int64   `json:"sent,omitempty"`          // sent in the measured window
	Errors          int64   `json:"errors,omitempty"`        // send or receive errors in the window
	CreditStalls    int64   `json:"credit_stalls,omitempty"` // closed-loop credits given back after a loss

	CPUSeconds  float64 `json:"cpu_seconds"`
	CPUCores    float64 `json:"cpu_cores"` // cpu_seconds / seconds
	CPUusPerMsg float64 `json:"cpu_us_per_msg"`
	// LoadCPUCores is this (load) process's CPU use in the window: near
	// the machine's core count minus CPUCores, the load generator, not the
	// server, limits the throughput.
	LoadCPUCores float64 `json:"load_cpu_cores"`
	// OtherCPUCores is what the rest of the machine used in the window
	// (every CPU's busy time minus the server's and the load's): well
	// above zero, other work shared the CPUs and the numbers are low.
	OtherCPUCores float64 `json:"other_cpu_cores"`
	// MachineBusy is the share of the machine's CPU time that was busy in
	// the window (every CPU's); CPUSaturated is set at 0.9 or more: the
	// latencies then include waiting for a CPU, the load generator's as
	// much as the server's, and the shape is too heavy for this machine
	// to measure the server's latency (its CPU per message still holds).
	MachineBusy  float64 `json:"machine_busy,omitempty"`
	CPUSaturated bool    `json:"cpu_saturated,omitempty"`
	// RelayCPUCores is the balancer mode's relay child CPU use.
	RelayCPUCores float64 `json:"relay_cpu_cores,omitempty"`
	// EdgeCPUCores is the forwarding mode's edge relay share of CPUCores
	// (the rest is the holder's).
	EdgeCPUCores float64 `json:"edge_cpu_cores,omitempty"`
	// MeshForwards is how many connections the forwarding mode's edge
	// relay forwarded to the holder during the run (its
	// purrfly_relay_mesh_forwards_total{result="ok"}): every client in the
	// forwarded run, none in the direct one.
	MeshForwards int64 `json:"mesh_forwards,omitempty"`
	// MeshPackets is the frames the edge carried over its links, both
	// ways, in the measured window (purrfly_relay_forwarded_packets_total
	// {dir="mesh_out"} plus {dir="mesh_in"}).
	MeshPackets int64 `json:"mesh_packets,omitempty"`
	// UDPDatagramsIn and UDPDatagramsOut are what the relay's LiteNetLib
	// socket received and sent in the measured window of a UDP run
	// (purrfly_relay_udp_datagrams_{received,sent}_total): messages plus
	// LiteNetLib's acks and pings, less what was merged.
	UDPDatagramsIn  int64 `json:"udp_datagrams_in,omitempty"`
	UDPDatagramsOut int64 `json:"udp_datagrams_out,omitempty"`
	// DirectFrames and WriteBatches are, in the measured window of a
	// WebSocket relay run, the frames the relay's readers wrote to their
	// receivers' sockets themselves (one system call each,
	// purrfly_relay_direct_writes_total{result="whole"|"partial"}) and the
	// batches of queued frames its writers wrote
	// (purrfly_relay_write_batches_total): (messages - direct) / batches
	// is the frames per batch.
	DirectFrames int64 `json:"direct_frames,omitempty"`
	WriteBatches int64 `json:"write_batches,omitempty"`
	// Events is, in the balancer mode with Options.WatchEvents, how many
	// room and instance events the open GET /v1/events stream read over
	// the run (warmup included).
	Events int64 `json:"events,omitempty"`

	Connections       int     `json:"connections"`
	RSSStartBytes     int64   `json:"rss_start_bytes"`     // before the load connected
	RSSConnectedBytes int64   `json:"rss_connected_bytes"` // every connection open, no traffic yet
	RSSEndBytes       int64   `json:"rss_end_bytes"`       // end of the measured window
	RSSPerConnBytes   float64 `json:"rss_per_conn_bytes"`  // (connected - start) / connections
	ConnectSeconds    float64 `json:"connect_sec"`

	trips roundTrips // this run's round trips for Pooled: set by summarize, read-only after
}

func newShape(o Options) Shape {
	s := Shape{
		Kind: "traffic", Mode: o.Mode, Rooms: o.Rooms, Clients: o.Clients, Connections: o.connections(),
		Size: o.Size, Rate: o.Rate, DurationSec: o.Duration.Seconds(), WarmupSec: o.Warmup.Seconds(),
		CPUs: runtime.NumCPU(), Balancer: "in-process", Repeat: o.Repeat, Transport: o.Transport.String(),
	}
	if o.Transport.UDP() {
		s.Delivery = o.Delivery.String()
	}
	if o.Rate == 0 {
		s.Window = o.Window
	}
	if o.BalancerLoad > 0 {
		s = Shape{Kind: "balancer", Workers: o.BalancerLoad, DurationSec: o.Duration.Seconds(),
			WarmupSec: o.Warmup.Seconds(), CPUs: runtime.NumCPU(), Balancer: "child", Repeat: o.Repeat}
	}
	if o.Idle > 0 {
		s.Kind, s.Mode, s.Size, s.Window, s.WarmupSec, s.Delivery = "idle", "", 0, 0, 0, ""
	}
	if o.BalancerURL != "" {
		s.Balancer = o.BalancerURL
	}
	if o.Forwarded {
		s.Kind = "forwarded"
	}
	return s
}

func (r *Result) computeRatios() {
	if r.Balancer != nil && r.Baseline != nil {
		a, b := r.Balancer, r.Baseline
		r.RatioMsgs = ratio(a.MsgsPerSec, b.MsgsPerSec)
		r.RatioCPUPerPair = ratio(a.CPUusPerMsg, b.CPUusPerMsg)
		r.RatioP99 = ratio(a.P99us, b.P99us)
		return
	}
	if r.Relay == nil || r.Baseline == nil {
		return
	}
	a, b := r.Relay, r.Baseline
	r.RatioMsgs = ratio(a.MsgsPerSec, b.MsgsPerSec)
	r.RatioCPU = ratio(b.CPUusPerMsg, a.CPUusPerMsg)
	r.RatioP99 = ratio(a.P99us, b.P99us)
	if b.RTTP99us == 0 { // an echo, whose message is its round trip
		r.RatioRTTP99 = ratio(a.RTTP99us, b.P99us)
		r.RatioArrivalRTTP99 = ratio(a.ArrivalRTTP99us, b.ArrivalP99us)
	}
	r.RatioRSSPerConn = ratio(a.RSSPerConnBytes, b.RSSPerConnBytes)
}

func ratio(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return round3(a / b)
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func us(d time.Duration) float64 { return round3(float64(d) / 1e3) }

// Run1 is one repetition of a Run with Repeat > 1.
type Run1 struct {
	Relay           *Side   `json:"relay,omitempty"`
	Balancer        *Side   `json:"balancer,omitempty"`
	Baseline        *Side   `json:"baseline,omitempty"`
	RatioMsgs       float64 `json:"ratio_msgs,omitempty"`
	RatioCPU        float64 `json:"ratio_cpu,omitempty"`
	RatioCPUPerPair float64 `json:"ratio_cpu_per_pair,omitempty"`
}

// medianSide folds repetitions into one Side: the median of every rate,
// latency and CPU figure, the sum of errors and stalls, and the memory
// figures of the first repetition (later ones start with memory the first
// left behind, so their per-connection growth says little).
func medianSide(sides []*Side) *Side {
	if len(sides) == 0 {
		return nil
	}
	if len(sides) == 1 {
		return sides[0]
	}
	m := *sides[0]
	m.Errors, m.CreditStalls = 0, 0
	for _, s := range sides {
		m.Errors += s.Errors
		m.CreditStalls += s.CreditStalls
	}
	med := func(get func(*Side) float64) float64 {
		v := make([]float64, len(sides))
		for i, s := range sides {
			v[i] = get(s)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return round3((v[len(v)/2-1] + v[len(v)/2]) / 2)
	}
	m.Messages = int64(med(func(s *Side) float64 { return float64(s.Messages) }))
	m.Sent = int64(med(func(s *Side) float64 { return float64(s.Sent) }))
	m.Seconds = med(func(s *Side) float64 { return s.Seconds })
	m.MsgsPerSec = med(func(s *Side) float64 { return s.MsgsPerSec })
	m.BytesPerSec = med(func(s *Side) float64 { return s.BytesPerSec })
	m.P50us = med(func(s *Side) float64 { return s.P50us })
	m.P99us = med(func(s *Side) float64 { return s.P99us })
	m.P999us = med(func(s *Side) float64 { return s.P999us })
	m.RTTP50us = med(func(s *Side) float64 { return s.RTTP50us })
	m.RTTP99us = med(func(s *Side) float64 { return s.RTTP99us })
	m.ToHostP99us = med(func(s *Side) float64 { return s.ToHostP99us })
	m.ToClientP99us = med(func(s *Side) float64 { return s.ToClientP99us })
	m.ArrivalP50us = med(func(s *Side) float64 { return s.ArrivalP50us })
	m.ArrivalP99us = med(func(s *Side) float64 { return s.ArrivalP99us })
	m.ArrivalRTTP50us = med(func(s *Side) float64 { return s.ArrivalRTTP50us })
	m.ArrivalRTTP99us = med(func(s *Side) float64 { return s.ArrivalRTTP99us })
	m.MaxUs = med(func(s *Side) float64 { return s.MaxUs })
	m.CPUSeconds = med(func(s *Side) float64 { return s.CPUSeconds })
	m.CPUCores = med(func(s *Side) float64 { return s.CPUCores })
	m.EdgeCPUCores = med(func(s *Side) float64 { return s.EdgeCPUCores })
	m.MeshForwards = int64(med(func(s *Side) float64 { return float64(s.MeshForwards) }))
	m.MeshPackets = int64(med(func(s *Side) float64 { return float64(s.MeshPackets) }))
	m.UDPDatagramsIn = int64(med(func(s *Side) float64 { return float64(s.UDPDatagramsIn) }))
	m.UDPDatagramsOut = int64(med(func(s *Side) float64 { return float64(s.UDPDatagramsOut) }))
	m.DirectFrames = int64(med(func(s *Side) float64 { return float64(s.DirectFrames) }))
	m.WriteBatches = int64(med(func(s *Side) float64 { return float64(s.WriteBatches) }))
	m.Events = int64(med(func(s *Side) float64 { return float64(s.Events) }))
	m.CPUusPerMsg = med(func(s *Side) float64 { return s.CPUusPerMsg })
	m.RelayCPUCores = med(func(s *Side) float64 { return s.RelayCPUCores })
	m.LoadCPUCores = med(func(s *Side) float64 { return s.LoadCPUCores })
	m.OtherCPUCores = med(func(s *Side) float64 { return s.OtherCPUCores })
	m.MachineBusy = med(func(s *Side) float64 { return s.MachineBusy })
	m.CPUSaturated = m.MachineBusy >= 0.9
	m.ConnectSeconds = med(func(s *Side) float64 { return s.ConnectSeconds })
	return &m
}
