package bench

import (
	"fmt"
	"io"
)

// WriteText writes the result for a person at a terminal (purrctl bench
// without --json): the shape, one line per side with its figures, and the
// relay/baseline ratios.
func (r *Result) WriteText(w io.Writer) {
	s := r.Shape
	if s.Kind == "balancer" {
		writeBalancer(w, r)
		return
	}
	if s.Kind == "idle" {
		writeIdle(w, r)
		return
	}
	if s.Kind == "soak" {
		writeSoak(w, r.Soak)
		return
	}
	loop := fmt.Sprintf("closed loop, window %d", s.Window)
	if s.Rate > 0 {
		loop = fmt.Sprintf("open loop, %g msg/s per client", s.Rate)
	}
	fmt.Fprintf(w, "%s over %s: %d rooms x %d clients (%d connections), %d-byte payloads, %s, %gs measured after %gs warmup\n",
		s.Mode, transportName(s), s.Rooms, s.Clients, s.Connections, s.Size, loop, s.DurationSec, s.WarmupSec)
	if s.Transport == "udp" {
		fmt.Fprintf(w, "baseline: a plain UDP echo (one read, one write per datagram) loaded by plain UDP sockets, datagrams as long as the relay's\n")
	}
	names := "relay/baseline"
	if s.Kind == "forwarded" {
		names = "forwarded/direct"
		fmt.Fprintf(w, "forwarded: hosts on relay 1, clients without a session hint on relay 2 (one mesh hop); direct: all on relay 1; CPU and RSS are both relays'\n")
	}
	fmt.Fprintf(w, "%-9s %12s %10s %9s %9s %9s %10s %9s %9s %9s %10s\n",
		"server", "msgs/s", "MB/s", "p50 us", "p99 us", "p999 us", "cpu us/msg", "cpu cores", "load cpu", "RSS MiB", "RSS B/conn")
	for _, sd := range []*Side{r.Relay, r.Baseline} {
		if sd == nil {
			continue
		}
		fmt.Fprintf(w, "%-9s %12.0f %10.2f %9.0f %9.0f %9.0f %10.2f %9.2f %9.2f %9.1f %10.0f\n",
			sd.Server, sd.MsgsPerSec, sd.BytesPerSec/1e6, sd.P50us, sd.P99us, sd.P999us,
			sd.CPUusPerMsg, sd.CPUCores, sd.LoadCPUCores, mib(sd.RSSEndBytes), sd.RSSPerConnBytes)
		if sd.CPUSaturated {
			fmt.Fprintf(w, "          (the machine's CPUs were %.0f%% busy: latencies include waiting for a CPU, the load generator's as much as the server's; use a lighter shape to measure latency)\n", 100*sd.MachineBusy)
		}
		if sd.OtherCPUCores > 0.2 {
			fmt.Fprintf(w, "          (other processes used %.2f cores meanwhile: numbers are low)\n", sd.OtherCPUCores)
		}
		if sd.RTTP99us > 0 {
			fmt.Fprintf(w, "          (a round trip through it, client to host and back, p50 %.0f us, p99 %.0f us: the two directions' latencies as independent crossings)\n", sd.RTTP50us, sd.RTTP99us)
		}
		if sd.ArrivalP99us > 0 {
			fmt.Fprintf(w, "          (to the kernel's arrival stamp on the load's socket, before the load read it: p50 %.0f us, p99 %.0f us", sd.ArrivalP50us, sd.ArrivalP99us)
			if sd.ArrivalRTTP99us > 0 {
				fmt.Fprintf(w, "; a round trip p50 %.0f us, p99 %.0f us", sd.ArrivalRTTP50us, sd.ArrivalRTTP99us)
			}
			fmt.Fprintln(w, ")")
		}
		if sd.Errors > 0 || sd.CreditStalls > 0 {
			fmt.Fprintf(w, "          (%d errors, %d lost-message stalls)\n", sd.Errors, sd.CreditStalls)
		}
		if sd.UDPDatagramsIn > 0 && sd.Messages > 0 {
			fmt.Fprintf(w, "          (relay's UDP socket: %.2f datagrams in and %.2f out per message: LiteNetLib acks and pings, less merging)\n",
				float64(sd.UDPDatagramsIn)/float64(sd.Messages), float64(sd.UDPDatagramsOut)/float64(sd.Messages))
		}
		if s.Kind == "forwarded" {
			fmt.Fprintf(w, "          (relay 2: %.2f cores, %d connections forwarded, %d frames over the mesh)\n",
				sd.EdgeCPUCores, sd.MeshForwards, sd.MeshPackets)
		}
	}
	if r.Relay != nil && r.Baseline != nil {
		if n := len(r.Runs); n > 0 {
			fmt.Fprintf(w, "(medians of %d alternating runs; --json lists each)\n", n)
		}
		fmt.Fprintf(w, "%s: msgs/s %.3f  msgs per CPU-s %.3f  p99 %.3f  RSS/conn %.3f\n",
			names, r.RatioMsgs, r.RatioCPU, r.RatioP99, r.RatioRSSPerConn)
		if r.RatioRTTP99 > 0 {
			fmt.Fprintf(w, "relay round trip p99 / baseline p99 (two crossings against one): %.3f\n", r.RatioRTTP99)
		}
		if r.RatioArrivalRTTP99 > 0 {
			fmt.Fprintf(w, "the same to the kernel's arrival stamps (the load's own scheduling left out): %.3f\n", r.RatioArrivalRTTP99)
		}
		if p := r.Pooled; p != nil {
			fmt.Fprintf(w, "over every message of the %d runs: relay round trip p50 %.0f us, p99 %.0f us; baseline p50 %.0f us, p99 %.0f us; p99 ratio %.3f\n",
				p.Runs, p.RelayRTTP50us, p.RelayRTTP99us, p.BaselineP50us, p.BaselineP99us, p.RatioRTTP99)
			if p.RatioArrivalRTTP99 > 0 {
				fmt.Fprintf(w, "  to the arrival stamps: relay p50 %.0f us, p99 %.0f us; baseline p50 %.0f us, p99 %.0f us; p99 ratio %.3f\n",
					p.RelayArrivalRTTP50us, p.RelayArrivalRTTP99us, p.BaselineArrivalP50us, p.BaselineArrivalP99us, p.RatioArrivalRTTP99)
			}
		} else if r.PooledMissing != "" {
			fmt.Fprintf(w, "(no figures over every message: %s)\n", r.PooledMissing)
		}
	}
}

func writeBalancer(w io.Writer, r *Result) {
	s := r.Shape
	fmt.Fprintf(w, "balancer: %d workers allocate+join fresh rooms, %gs measured after %gs warmup\n", s.Workers, s.DurationSec, s.WarmupSec)
	for _, b := range []*Side{r.Balancer, r.Baseline} {
		if b == nil {
			continue
		}
		fmt.Fprintf(w, "%-8s pairs/s %.0f  p50 %.0f us  p99 %.0f us  p999 %.0f us  errors %d  cpu %.2f cores (%.1f us/pair)  relay cpu %.2f cores  load cpu %.2f cores  other %.2f cores  RSS %.1f MiB\n",
			b.Server, b.MsgsPerSec, b.P50us, b.P99us, b.P999us, b.Errors, b.CPUCores, b.CPUusPerMsg, b.RelayCPUCores, b.LoadCPUCores, b.OtherCPUCores, mib(b.RSSEndBytes))
		if b.OtherCPUCores > 0.2 {
			fmt.Fprintf(w, "         (other processes used %.2f cores meanwhile: numbers are low)\n", b.OtherCPUCores)
		}
	}
	if r.Baseline != nil {
		if n := len(r.Runs); n > 0 {
			fmt.Fprintf(w, "(medians of %d alternating runs; --json lists each)\n", n)
		}
		fmt.Fprintf(w, "balancer/floor: pairs/s %.3f  CPU per pair %.3f  p99 %.3f\n", r.RatioMsgs, r.RatioCPUPerPair, r.RatioP99)
	}
}

func writeIdle(w io.Writer, r *Result) {
	s := r.Shape
	fmt.Fprintf(w, "idle over %s: %d authenticated connections (%d rooms of 1 host + up to %d clients), held %gs\n",
		transportName(s), s.Connections, s.Rooms, s.Clients, s.DurationSec)
	fmt.Fprintf(w, "%-9s %10s %12s %14s %12s %12s %12s\n",
		"server", "connect s", "RSS start", "RSS connected", "RSS end", "B/conn", "cpu cores")
	for _, sd := range []*Side{r.Relay, r.Baseline} {
		if sd == nil {
			continue
		}
		fmt.Fprintf(w, "%-9s %10.1f %10.1fMiB %12.1fMiB %10.1fMiB %12.0f %12.3f\n", sd.Server, sd.ConnectSeconds,
			mib(sd.RSSStartBytes), mib(sd.RSSConnectedBytes), mib(sd.RSSEndBytes), sd.RSSPerConnBytes, sd.CPUCores)
	}
	if r.RatioRSSPerConn > 0 {
		fmt.Fprintf(w, "relay/baseline RSS per connection: %.3f\n", r.RatioRSSPerConn)
	}
}

// transportName is "ws", or "udp" with the delivery method.
func transportName(s Shape) string {
	if s.Delivery == "" {
		return s.Transport
	}
	return s.Transport + " (" + s.Delivery + ")"
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func writeSoak(w io.Writer, s *SoakResult) {
	fmt.Fprintf(w, "connection soak: %d rounds of %d connections, authentication and header timeouts %gs, %.1fs in all\n",
		s.Rounds, s.Opened/max(1, s.Rounds), s.TimeoutSec, s.Seconds)
	fmt.Fprintf(w, "relay before: %d goroutines, %d fds; settled after round 1: %d goroutines, %d fds\n",
		s.Before.Goroutines, s.Before.FDs, s.Settled.Goroutines, s.Settled.FDs)
	fmt.Fprintf(w, "%-5s %7s %7s %6s %6s %8s %9s %7s %6s %6s %10s %8s %9s %7s\n", "round", "players", "played", "deaf", "unauth",
		"silent", "slowloris", "closed", "late", "errors", "close max", "settled", "goroutine", "fd")
	for i, r := range s.Round {
		fmt.Fprintf(w, "%-5d %7d %7d %6d %6d %8d %9d %7d %6d %6d %9.2fs %7.2fs %+9d %+7d\n", i+1,
			r.Opened["player"], r.Played, r.Opened["never_reading"], r.Opened["unauthenticated"], r.Opened["silent"], r.Opened["slowloris"],
			r.ClosedByRelay, r.NotClosed, r.Errors+r.Refused, r.MaxCloseSec, r.SettleSec, r.GoroutineGrowth, r.FDGrowth)
		if r.FirstError != "" {
			fmt.Fprintf(w, "      first error: %s\n", r.FirstError)
		}
	}
}
