package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/flysim"
)

// Options configure a soak. Config is required; the rest have defaults.
type Options struct {
	// Config is the organisation (fly/chaos.toml): which apps are the
	// balancer and relays, their secret, intervals and fault links.
	Config *flysim.Config
	// State attaches to a running `purrctl sim --config <Config> --state`;
	// nil starts the organisation in this process with Sim.
	State *flysim.State
	// Sim are the options of the in-process organisation (Executable: the
	// purrctl binary machines run; LogDir).
	Sim flysim.Options
	// LogDir is where the machine logs are (attached mode; in-process the
	// sim's own); empty skips the secrets scan in attached mode.
	LogDir string

	Duration     time.Duration // the storm (default 1 min)
	Seed         uint64        // 0: random, printed
	Rooms        int           // room slots playing at once (default 6, at most 64)
	Players      int           // players per room (default 2, at most 8)
	Regions      []string      // regions rooms are allocated in, round robin (default ams, sea)
	RoomLifetime time.Duration // mean life of a room before its host leaves (default 20 s)
	FaultGap     time.Duration // mean pause between faults after the audit (default 2 s)
	MaxFaults    int           // default: one per 5 s of Duration, at least one per kind
	// Rival adds FaultRival (rival.go) to the kinds.
	Rival    bool
	Progress io.Writer // progress lines (nil: none)
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = time.Minute
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64() >> 1
	}
	if o.Rooms <= 0 {
		o.Rooms = 6
	}
	if o.Players <= 0 {
		o.Players = 2
	}
	if len(o.Regions) == 0 {
		o.Regions = []string{"ams", "sea"}
	}
	if o.RoomLifetime <= 0 {
		o.RoomLifetime = 20 * time.Second
	}
	if o.FaultGap <= 0 {
		o.FaultGap = 2 * time.Second
	}
	if o.MaxFaults <= 0 {
		o.MaxFaults = max(len(FaultKinds), int(o.Duration/(5*time.Second)))
	}
}

// Run storms the organisation for Options.Duration and reports. The error
// is for a soak that could not run at all; broken invariants are in the
// report (Report.Total).
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Config == nil {
		return nil, errors.New("chaos: no organisation config")
	}
	o.defaults()
	var progressMu sync.Mutex
	logf := func(s string) {
		if o.Progress != nil {
			progressMu.Lock()
			fmt.Fprintf(o.Progress, "%s %s\n", time.Now().Format("15:04:05.000"), s)
			progressMu.Unlock()
		}
	}
	logf(fmt.Sprintf("chaos soak: seed %d, %v, %d rooms of %d players", o.Seed, o.Duration, o.Rooms, o.Players))

	st, logDir := o.State, o.LogDir
	if st == nil {
		sim, err := flysim.New(o.Config, o.Sim)
		if err != nil {
			return nil, err
		}
		defer sim.Close()
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = sim.Start(sctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("chaos: start the organisation: %w", err)
		}
		s := sim.State()
		st, logDir = &s, sim.LogDir()
	}
	f, err := newFleet(o.Config, *st)
	if err != nil {
		return nil, err
	}
	defer f.hc.CloseIdleConnections()
	if err := f.ready(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	led := newLedger(logf)
	collect()
	before, err := f.measure(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: baseline: %w", err)
	}
	started := time.Now()

	vctx, stopViews := context.WithCancel(ctx)
	v := newViews(f, led)
	var vwg sync.WaitGroup
	vwg.Add(1)
	go func() { defer vwg.Done(); v.run(vctx) }()

	// The rooms play until the storm is over and the scheduler is done
	// (its first round of every kind may outlast Duration).
	storm, endStorm := context.WithTimeout(ctx, o.Duration)
	play, endPlay := context.WithCancel(ctx)
	w := newWorkload(f, v, led, o)
	w.start(play, o.Seed)
	sch := &scheduler{f: f, w: w, led: led, rng: rand.New(rand.NewPCG(o.Seed, 0)), log: logf, withRival: o.Rival}
	sch.run(ctx, storm, o.MaxFaults, o.FaultGap)
	<-storm.Done()
	endStorm()
	endPlay()
	logf("storm over: healing, closing rooms")
	w.wait()
	if ctx.Err() != nil {
		// Stopped (Ctrl-C): the fleet was never healed nor settled, so
		// judging its leaks or its rooms now would report the stop itself.
		stopViews()
		vwg.Wait()
		return nil, &InterruptedError{Seed: o.Seed, Elapsed: time.Since(started), Faults: led.faultCount()}
	}
	f.healAll(ctx)
	stopViews()
	vwg.Wait()

	rows := f.settle(ctx, before, 60*time.Second, func() {
		w.hc.CloseIdleConnections()
		f.hc.CloseIdleConnections()
		http.DefaultClient.CloseIdleConnections()
	}, func(n int) { led.add("fds_closed_by_gc", int64(max(n, 0))) })
	for _, r := range rows {
		if !r.ok() {
			led.violate(InvLeak, "", "%s: goroutines %.0f -> %.0f, fds %.0f -> %.0f", r.Process,
				r.GoroutinesBefore, r.GoroutinesAfter, r.FDsBefore, r.FDsAfter)
		}
	}
	if rows == nil {
		led.violate(InvLeak, "", "the fleet's figures could not be read after the storm")
	}
	rep := &Report{Seed: o.Seed, Planned: o.Duration.String(), Elapsed: time.Since(started).Round(time.Second).String(), Baseline: rows}
	if logDir != "" {
		if rep.LogFiles, rep.LogLines, err = scanSecrets(logDir, []string{f.secret, st.Token}, led); err != nil {
			return nil, fmt.Errorf("chaos: scan logs: %w", err)
		}
	}
	led.mu.Lock()
	rep.Faults, rep.Counts, rep.Violations, rep.Details = led.faults, led.counts, led.violations, led.details
	rep.Worst = map[string]string{}
	for k, d := range led.maxes {
		rep.Worst[k] = d.Round(time.Millisecond).String()
	}
	led.mu.Unlock()
	for _, k := range Invariants {
		rep.Violations[k] += 0 // every invariant listed, zeros included
	}
	rep.Bounds = map[string]string{
		"player_socket_close":  socketBound.String(),
		"join_after_death":     w.joinBound().String(),
		"recovery_after_fault": sch.recoverBound().String(),
	}
	return rep, nil
}

// ready waits until the balancer lists every started relay machine.
func (f *fleet) ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	api := &client.Balancer{BaseURL: f.st.Apps[f.balancer].URL, HTTP: f.hc}
	for {
		ms, err := f.started(ctx, f.relays...)
		if err == nil {
			in, err := api.Instances(ctx, f.secret)
			if err == nil && len(in) == len(ms) && len(ms) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: the balancer does not list every relay machine: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// healAll ends every network fault and starts every stopped machine, so
// the after-storm figures are of the whole fleet.
func (f *fleet) healAll(ctx context.Context) {
	for _, l := range f.links {
		for _, name := range l {
			if name != "" {
				_ = f.netFault(ctx, flysim.NetFault{Kind: flysim.NetHeal, Link: name})
			}
		}
	}
	if f.multi != "" {
		_ = f.netFault(ctx, flysim.NetFault{Kind: flysim.NetHeal, App: f.multi})
	}
	for _, a := range append([]string{f.balancer}, f.relays...) {
		ms, err := f.machines(ctx, a)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if len(m.Config.Standbys) > 0 {
				continue // a standby stays stopped until its machine's host fails
			}
			if m.State == flysim.StateStopped {
				_ = f.start(ctx, m)
			}
			_ = f.wait(ctx, m, flysim.StateStarted, 30*time.Second)
		}
	}
	_ = f.ready(ctx, 60*time.Second)
}
