package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/clock"
)

// The balancer mode: workers allocate a fresh room and join it, back to
// back, against a balancer running in its own process, so its CPU time is
// measured alone. The relay behind it is a real relay child: the balancer
// calls its allocation endpoint for every room, as in production. Rooms
// are never connected, so they stay reserved on the relay (and listed by
// the balancer) until the run ends. The floor (--baseline) calls the same
// relay child, so the relay holds its rooms too.

// The balancer mode's relay child holds every room of the run (never
// connected, they are never released), far more than a relay's default
// bound of 10,000 (past which it is full and every allocation failed), and
// its heartbeat, which republishes every room it holds, is left out of
// the run: those publications are work the floor never sees, and they
// would land in one measured window and not another.
const (
	pairRelayMaxRooms     = 4 << 20
	pairRelayHeartbeatSec = 3600
)

// runBalancerLoad runs the balancer mode; the Side's "messages" are
// allocate+join pairs and its latencies those of a whole pair. With
// Baseline the same load also runs against the floor (balancerfloor.go),
// through the same relay child, Repeat times each, alternating which
// goes first.
func runBalancerLoad(ctx context.Context, o Options) (*Result, error) {
	adminKey := "bench-admin-" + randomHex(16)
	balCh, err := startChild(ctx, o, ServerConfig{Kind: KindBalancer, Secret: o.Secret, Region: benchRegion, AdminKey: adminKey,
		CPUProfile: o.profile(KindBalancer)})
	if err != nil {
		return nil, err
	}
	defer balCh.stop()
	relayCh, err := startChild(ctx, o, ServerConfig{Kind: KindRelay, Secret: o.Secret, BalancerURL: balCh.url, Region: benchRegion,
		MaxRooms: pairRelayMaxRooms, HeartbeatSec: pairRelayHeartbeatSec, CPUProfile: o.profile(KindRelay)})
	if err != nil {
		return nil, err
	}
	defer relayCh.stop()
	// One keep-alive connection per worker (twice that in reserve), so no
	// pair pays for a new TCP connection; the answers are small JSON, so
	// no gzip negotiation either.
	hc := &http.Client{Transport: &http.Transport{
		MaxIdleConns: o.BalancerLoad * 4, MaxIdleConnsPerHost: o.BalancerLoad * 2, IdleConnTimeout: time.Minute,
		DisableCompression: true,
	}}
	defer hc.CloseIdleConnections()
	bc := &client.Balancer{BaseURL: balCh.url, HTTP: hc}
	if err := waitRegistered(ctx, bc, o.Secret, relayCh, 1); err != nil {
		return nil, err
	}
	sides := []pairTarget{{name: "balancer", ch: balCh, bc: bc}}
	if o.WatchEvents {
		sides[0].admin = &client.Admin{BaseURL: balCh.url, Key: adminKey, HTTP: hc}
	}
	if o.Baseline {
		floorCh, err := startChild(ctx, o, ServerConfig{Kind: KindBalancerFloor, Secret: o.Secret, RelayURL: relayCh.http, CPUProfile: o.profile(KindBalancerFloor)})
		if err != nil {
			return nil, err
		}
		defer floorCh.stop()
		sides = append(sides, pairTarget{name: "floor", ch: floorCh, bc: &client.Balancer{BaseURL: floorCh.url, HTTP: hc}})
	}
	o.Logger.Info("balancer mode children ready", "balancer", balCh.pid, "relay", relayCh.pid, "sides", len(sides))

	res := &Result{Shape: newShape(o)}
	var bals, floors []*Side
	for rep := range o.Repeat {
		var pair Result
		for i := range sides {
			t := sides[(i+rep)%len(sides)] // alternate which goes first
			s, err := measurePairs(ctx, o, t, relayCh)
			if err != nil {
				return nil, fmt.Errorf("%s run: %w", t.name, err)
			}
			if t.name == "floor" {
				pair.Baseline, floors = s, append(floors, s)
			} else {
				pair.Balancer, bals = s, append(bals, s)
			}
		}
		pair.computeRatios()
		if o.Repeat > 1 {
			res.Runs = append(res.Runs, Run1{Balancer: pair.Balancer, Baseline: pair.Baseline,
				RatioMsgs: pair.RatioMsgs, RatioCPUPerPair: pair.RatioCPUPerPair})
		}
	}
	res.Balancer, res.Baseline = medianSide(bals), medianSide(floors)
	res.computeRatios()
	return res, nil
}

// pairTarget is one server of the balancer mode: the balancer, or its
// floor.
type pairTarget struct {
	name  string // "balancer" or "floor"
	ch    *child
	bc    *client.Balancer
	admin *client.Admin // the balancer's /v1 while events are watched (Options.WatchEvents), else nil
}

// measurePairs runs the closed-loop workers against t for the warmup and
// the measured window and reads t's CPU (and the relay's) around it.
func measurePairs(ctx context.Context, o Options, t pairTarget, relayCh *child) (*Side, error) {
	s := &Side{Server: t.name, ServerPID: t.ch.pid}
	m, self, rm := meter{pid: t.ch.pid}, meter{pid: 0}, meter{pid: relayCh.pid}
	s.RSSStartBytes = m.rss()
	var stopWatch func() (int64, error)
	if t.admin != nil {
		stop, err := watchEvents(ctx, t.admin)
		if err != nil {
			return nil, err
		}
		defer stop() // a run that ends early reports its own error
		stopWatch = stop
	}
	w := &pairWorkers{o: o, bc: t.bc, prefix: "bench-" + randomHex(4)}
	w.start()
	err := clock.Sleep(ctx, nil, o.Warmup)
	var cpu0, load0, relay0, busy0 time.Duration
	var t0 time.Time
	if err == nil {
		self.pid = pidSelf()
		cpu0, load0, relay0, busy0, t0 = m.cpu(), self.cpu(), rm.cpu(), busy(), time.Now()
		w.phase.Store(phaseMeasuring)
		err = clock.Sleep(ctx, nil, o.Duration)
		w.phase.Store(phaseDone)
		s.Seconds = round3(time.Since(t0).Seconds())
		cpu1, load1, relay1, busy1 := m.cpu(), self.cpu(), rm.cpu(), busy()
		s.CPUSeconds = round3((cpu1 - cpu0).Seconds())
		if s.Seconds > 0 {
			s.CPUCores = round3(s.CPUSeconds / s.Seconds)
			s.LoadCPUCores = round3((load1 - load0).Seconds() / s.Seconds)
			s.RelayCPUCores = round3((relay1 - relay0).Seconds() / s.Seconds)
			s.OtherCPUCores = otherCores(busy1-busy0, cpu1-cpu0+relay1-relay0, load1-load0, s.Seconds)
		}
		s.RSSEndBytes = m.rss()
	}
	w.stop()
	if err != nil {
		return nil, err
	}
	if stopWatch != nil {
		n, werr := stopWatch()
		if werr != nil {
			return nil, fmt.Errorf("%s: %w", t.name, werr)
		}
		s.Events = n
	}
	for _, c := range []*child{t.ch, relayCh} {
		if e := c.exited(); e != nil {
			return nil, fmt.Errorf("%s: %w", t.name, e)
		}
	}
	if m.err != nil {
		return nil, m.err
	}
	var h histogram
	for _, r := range w.results {
		h.merge(&r.h)
		s.Messages += r.msgs
		s.Errors += r.errs
	}
	if s.Seconds > 0 {
		s.MsgsPerSec = round3(float64(s.Messages) / s.Seconds)
	}
	if s.Messages > 0 {
		s.CPUusPerMsg = round3(s.CPUSeconds * 1e6 / float64(s.Messages))
	}
	s.P50us, s.P99us, s.P999us = us(h.quantile(0.5)), us(h.quantile(0.99)), us(h.quantile(0.999))
	s.MaxUs = us(time.Duration(h.max))
	if w.firstErr != nil && s.Messages == 0 {
		return nil, fmt.Errorf("no allocate+join pair succeeded: %w", w.firstErr)
	}
	return s, nil
}

// pairWorkers are the closed-loop allocate+join workers.
type pairWorkers struct {
	o      Options
	bc     *client.Balancer
	prefix string
	phase  atomic.Int32
	seq    atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup

	results  []*receiver // one per worker, read after wg.Wait
	errOnce  sync.Once
	firstErr error // set once, read after wg.Wait
}

func (w *pairWorkers) start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	limit := w.o.MaxMessages / int64(w.o.BalancerLoad)
	for range w.o.BalancerLoad {
		r := &receiver{}
		w.results = append(w.results, r)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for n := int64(0); n < limit && ctx.Err() == nil; n++ {
				name := w.prefix + "-" + strconv.FormatInt(w.seq.Add(1), 10)
				t := time.Now()
				_, err := w.bc.Allocate(ctx, benchRegion, name, client.NewAllocationID())
				if err == nil {
					_, err = w.bc.Join(ctx, name)
				}
				lat := time.Since(t)
				measuring := w.phase.Load() == phaseMeasuring
				switch {
				case err != nil && ctx.Err() == nil:
					w.errOnce.Do(func() { w.firstErr = err })
					if measuring {
						r.errs++
					}
					// Back off a little so a failing balancer is not spun on.
					if clock.Sleep(ctx, nil, 10*time.Millisecond) != nil {
						return
					}
				case err == nil && measuring:
					r.h.record(int64(lat))
					r.msgs++
				}
			}
		}()
	}
}

func (w *pairWorkers) stop() {
	w.cancel()
	w.wg.Wait() // every request is bounded by the client's timeout
}
