package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// Roles of a machine.
const (
	RoleRelay    = "relay"
	RoleBalancer = "balancer"
)

// Strategy is how a rollout deploys a relay machine.
type Strategy string

// Strategies.
const (
	// StrategyOverlap creates a replacement machine with the new config,
	// proves it, then retires the old one: no game is interrupted.
	StrategyOverlap Strategy = "overlap"
	// StrategyInPlace drains the machine for the drain window and updates
	// it in place: games still playing at the drain deadline are cut off.
	StrategyInPlace Strategy = "in-place"
)

// ParseStrategy reads --strategy ("" is overlap).
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case "":
		return StrategyOverlap, nil
	case StrategyOverlap, StrategyInPlace:
		return st, nil
	}
	return "", fmt.Errorf("strategy %q is not overlap or in-place", s)
}

// Options are one rollout's inputs.
type Options struct {
	// Env is the target (from LoadFile). Required.
	Env *Env
	// Image is the image every machine ends up on. Required.
	Image string
	// Token is FLY_API_TOKEN, Secret the shared SECRET guarding the
	// balancer's admin API, MachinesAPI the Machines API base
	// (FLY_FLAPS_BASE_URL, default DefaultMachinesAPI). An environment that
	// sets token, secret or machines_api in its file (the emulator) is
	// pinned to those: a real FLY_API_TOKEN is never sent to it.
	Token       string
	Secret      string
	MachinesAPI string
	// AdminKey is the balancer's ADMIN_KEY (the operator's key of its /v1
	// API): launch sets it as an app secret where the balancer has none.
	// A rollout does not need it.
	AdminKey string
	// DryRun reads the fleet, reports the plan and changes nothing.
	DryRun bool
	// Rollback puts a machine whose step failed after its update back on
	// its previous config and verifies it the same way. (With the overlap
	// strategy the old machine is never touched before its replacement is
	// proven: a failed replacement is destroyed and the old machine runs on,
	// which is what a rollback would give.)
	Rollback bool
	// Strategy is how a relay machine is deployed: StrategyOverlap (""),
	// the default, or StrategyInPlace.
	Strategy Strategy
	// WaitRetired waits, once the rollout is done, until every retiring
	// relay machine has stopped (and destroys it), counting down to its
	// latest stop.
	WaitRetired bool
	// Observer gets every event, in order, on the rollout's goroutine.
	Observer func(Event)
	// Logger gets debug detail; nil discards it.
	Logger *slog.Logger
	// HTTPClient carries /ping, the admin API and the smoke test; nil means
	// a client of its own (closed at the end).
	HTTPClient *http.Client
	// Transport carries Machines API requests; nil means
	// http.DefaultTransport.
	Transport http.RoundTripper
	// APIRate and APIBurst shape Machines API requests per action and
	// machine (default one a second, burst 3); RetryBase is the first retry
	// delay (default 500 ms) and APITries the attempts per request (6).
	APIRate   time.Duration
	APIBurst  int
	RetryBase time.Duration
	APITries  int
	// Clock drives every wait, deadline and event time (the Machines API's
	// rate limit and retries included); nil means the wall clock.
	Clock clock.Clock
}

// run is one rollout; owned by Run's goroutine (the lease refreshers touch
// only their lease).
type run struct {
	opts   Options
	env    *Env
	t      Timeouts
	image  string
	secret string
	api    *machinesAPI
	hc     *http.Client
	bal    *client.Balancer // the balancer's public URL: admin API and smoke
	log    *slog.Logger
	res    *Result
	clock  clock.Clock      // static; nil: the real one (tests that build a run)
	last   map[string]Event // by machine ID: its last state event (progress repeats it)
	// curPhase is the phase of the last event (the run's goroutine only):
	// a Machines API retry is said in it.
	curPhase Phase
	// observerPanicked: the Observer panicked once and is not called again
	// (so undrain and fail can still report, to the log).
	observerPanicked bool
	launch           bool // a launch's run: the summary counts what it created

	strategy Strategy // static
	id       string   // static: this run's id in the metadata it writes
	clean    cleanup  // what the plan found left by earlier runs (overlap.go)
	// seed are the machines launch created, by app: the plan adds any a
	// lagging machine list does not show yet.
	seed map[string][]*fly.Machine
	// stamps is each app's secrets stamp (MetaSecrets), read once a run;
	// setting an app's secrets forgets it.
	stamps map[string]string
	// newNames are the apps launch gave their first public address:
	// their names are waited for before a machine is reached by them.
	newNames map[string]bool
}

// Run rolls the environment's fleet to opts.Image: relays one machine at a
// time in the configured order, then the balancer, then waits for the exact
// new relay boots to register and smoke-tests every relay region. It
// returns the result and, when it stopped, a *Failure (or a *ConfigError
// when nothing could start).
func Run(ctx context.Context, opts Options) (*Result, error) {
	r, err := newRun(ctx, opts)
	if err != nil {
		return nil, err
	}
	if opts.HTTPClient == nil {
		defer r.hc.CloseIdleConnections()
	}
	return r.res, r.run(withRetryNotice(ctx, r.retryNotice))
}

func newRun(ctx context.Context, opts Options) (*run, error) {
	if opts.Env == nil {
		return nil, configErrorf("no environment given")
	}
	env := opts.Env
	if err := env.Validate(); err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("environment %s: %w", env.Name, err)}
	}
	strategy, err := ParseStrategy(string(opts.Strategy))
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	image := strings.TrimSpace(opts.Image)
	if image == "" || strings.ContainsAny(image, " \t\n") {
		return nil, configErrorf("--image must name one image reference, got %q", opts.Image)
	}
	token := firstNonEmpty(env.Token, opts.Token)
	if token == "" {
		return nil, configErrorf("FLY_API_TOKEN is not set (the Machines API needs it)")
	}
	secret := firstNonEmpty(env.Secret, opts.Secret)
	if secret == "" {
		return nil, configErrorf("SECRET is not set (the balancer's admin API needs the shared secret)")
	}
	if !wire.ValidSecretList(secret) {
		return nil, configErrorf("SECRET must be 1 to %d comma-separated values of printable ASCII without spaces", wire.MaxSecrets)
	}
	base := firstNonEmpty(env.MachinesAPI, opts.MachinesAPI, DefaultMachinesAPI)
	if err := checkURL(base); err != nil {
		return nil, configErrorf("Machines API base: %v", err)
	}
	api, err := newMachinesAPI(ctx, base, token, opts.Transport, opts.APIRate, opts.APIBurst, opts.RetryBase, opts.APITries)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second,
		}}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk := clock.OrReal(opts.Clock)
	api.clock, api.limit.clock, api.tr.clock = clk, clk, clk
	api.to = base
	return &run{
		strategy: strategy, id: newRolloutID(clk.Now()),
		opts: opts, env: env, t: env.Timeouts, image: image, secret: secret, api: api, hc: hc, clock: clk,
		bal:  &client.Balancer{BaseURL: env.Balancer.URL, HTTP: hc, Timeout: pingTimeout},
		log:  log.With("component", "rollout", "env", env.Name),
		res:  &Result{Env: env.Name, Image: image, DryRun: opts.DryRun},
		seed: map[string][]*fly.Machine{}, newNames: map[string]bool{}, stamps: map[string]string{},
	}, nil
}

// now is the time on the run's clock.
func (r *run) now() time.Time { return clock.OrReal(r.clock).Now() }

func (r *run) emit(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = r.now().UTC()
	}
	r.log.Debug(ev.Message, "phase", ev.Phase, "app", ev.App, "machine", ev.Machine, "status", ev.Status)
	if ev.Phase != "" {
		r.curPhase = ev.Phase
	}
	r.remember(ev)
	if r.opts.Observer != nil && !r.observerPanicked {
		r.observe(ev)
	}
}

// observe calls the Observer; a panic in it goes on up to the step (which
// turns it into an error), and the Observer is not called again.
func (r *run) observe(ev Event) {
	defer func() {
		if p := recover(); p != nil {
			r.observerPanicked = true
			panic(p)
		}
	}()
	r.opts.Observer(ev)
}

// run is the whole rollout: plan, relays, balancer, registration, smoke.
// A panic in a phase fails it like an error (a machine's step catches
// its own, so that it still undrains and releases its lease first).
func (r *run) run(ctx context.Context) error {
	var targets []*target
	if err := guard(func() (err error) { targets, err = r.plan(ctx); return err }); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			return err // nothing was touched: a setup problem (a token's reach)
		}
		return r.fail(ctx, PhasePlan, nil, err)
	}
	if r.opts.DryRun {
		r.emit(Event{Phase: PhaseDone, Status: StatusDone, Message: "dry run: nothing was changed"})
		return nil
	}
	if err := guard(func() error { return r.doCleanup(ctx, &r.clean) }); err != nil {
		return r.fail(ctx, PhaseCleanup, nil, err)
	}
	for _, tg := range targets {
		phase := PhaseRelays
		if tg.role == RoleBalancer {
			phase = PhaseBalancer
		}
		if err := guard(func() error { return r.deploy(ctx, phase, tg, targets) }); err != nil {
			return r.fail(ctx, phase, tg, err)
		}
	}
	for _, tg := range targets {
		if tg.role == RoleBalancer {
			if err := guard(func() error { return r.keepStandbys(ctx, tg.app, tg.m.ID) }); err != nil {
				return r.fail(ctx, PhaseBalancer, tg, err)
			}
		}
	}
	if err := guard(func() error { return r.registration(ctx, targets) }); err != nil {
		return r.fail(ctx, PhaseRegister, nil, err)
	}
	if err := guard(func() error { return r.smoke(ctx, targets) }); err != nil {
		return r.fail(ctx, PhaseSmoke, nil, err)
	}
	if err := guard(func() error { return r.retiringTable(ctx) }); err != nil {
		return r.fail(ctx, PhaseRetiring, nil, err)
	}
	if r.opts.WaitRetired {
		if err := guard(func() error { return r.waitRetired(ctx) }); err != nil {
			return r.fail(ctx, PhaseRetiring, nil, err)
		}
	}
	n, replaced := 0, 0
	for _, tg := range targets {
		switch tg.res.Action {
		case ActionUpdated:
			n++
		case ActionReplaced:
			replaced++
		}
	}
	verified := len(targets) - n - replaced
	msg := fmt.Sprintf("rollout of %s to %s done: %d machine(s) updated, %d verified unchanged", r.env.Name, r.image, n, verified)
	if c := len(r.res.Created); r.launch {
		msg = fmt.Sprintf("launch of %s on %s done: %d thing(s) created, %d machine(s) updated, %d verified unchanged", r.env.Name, r.image, c, n, verified)
	}
	if replaced > 0 {
		msg = fmt.Sprintf("rollout of %s to %s done: %d relay machine(s) replaced, %d machine(s) updated, %d verified unchanged; %d retiring",
			r.env.Name, r.image, replaced, n, verified, len(r.res.Retiring))
		if r.opts.WaitRetired {
			msg += " (all retired)"
		}
	}
	r.emit(Event{Phase: PhaseDone, Status: StatusDone, Image: r.image, Message: msg})
	return nil
}

// fail turns an error into a *Failure: it reads the fleet as it now is (with
// a short deadline of its own, so a cancelled rollout still reports it).
func (r *run) fail(ctx context.Context, phase Phase, tg *target, err error) error {
	f := &Failure{Phase: phase, Err: err, Reason: err.Error(), launch: r.launch}
	var se *stepError
	if errors.As(err, &se) {
		f.Reason = se.Error()
	}
	if ctx.Err() != nil {
		// The cause (a signal, a closed output) is said once: the step's
		// own error repeats it, so only its reason is kept.
		cut := f.Reason
		if se != nil {
			cut = se.reason
		}
		cause := context.Cause(ctx)
		f.Err = &interruption{ctxErr: ctx.Err(), cause: cause, err: err}
		f.Reason = fmt.Sprintf("interrupted: %v; cut short: %s", cause, cut)
	}
	drained := ""
	if tg != nil {
		drained = tg.drained
		f.App, f.Machine = tg.app.Name, tg.m.ID
		f.Rollback, f.RolledBack, f.RollbackErr = tg.rollback, tg.rolledBack, tg.rollbackErr
		if tg.res.Action != ActionRolledBack {
			tg.res.Action = ActionFailed
		}
		r.emit(Event{Phase: phase, App: tg.app.Name, Machine: tg.m.ID, Region: tg.m.Region, Status: StatusFailed,
			Image: tg.res.Image, Boot: tg.res.Boot, Message: f.Reason})
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	f.Fleet = r.fleet(fctx)
	f.Next = nextStep(f, drained, r.undrainURL(drained))
	r.emit(Event{Phase: phase, Status: StatusFailed, Message: f.Error()})
	return f
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
