package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/wire"
)

// Launch brings the environment's fleet into being: for the balancer first,
// then each relay app in order, it creates what is missing (the app, its
// public addresses, the SECRET app secret, machines up to the app's count
// in its region), each machine from the app's fly.toml and opts.Image;
// then it runs the rollout of opts.Image over the whole fleet, which
// verifies every machine (new ones included), the exact registration and
// the smoke test. Nothing existing is changed or removed: a re-run of a
// complete fleet creates nothing and verifies it. With opts.DryRun it
// reports what it would create and stops.
//
// Addresses follow Fly's rules for what the app serves: a relay app with a
// UDP service gets a dedicated IPv4 and nothing else (Fly carries UDP on no
// other address, and HOST_DOMAIN must resolve only to one that does); any
// other app a shared IPv4 and an IPv6. The balancer keeps its state in
// memory: launch creates one machine and refuses to go on when it finds
// more.
func Launch(ctx context.Context, opts Options) (*Result, error) {
	r, err := newRun(ctx, opts)
	if err != nil {
		return nil, err
	}
	if opts.HTTPClient == nil {
		defer r.hc.CloseIdleConnections()
	}
	r.launch = true
	apps := append([]App{r.env.Balancer}, r.env.Relays...)
	for _, a := range apps {
		if !a.Managed() {
			return nil, configErrorf("launch builds every app from its fly.toml: app %s has none (set the balancer's config and relay_config in the environment)", a.Name)
		}
	}
	for i := range apps {
		role := RoleRelay
		if i == 0 {
			role = RoleBalancer
		}
		if err := r.launchApp(ctx, role, &apps[i]); err != nil {
			return r.res, r.fail(ctx, PhaseLaunch, nil, err)
		}
	}
	if opts.DryRun {
		n := len(r.res.Created)
		r.emit(Event{Phase: PhaseDone, Status: StatusDone, Message: fmt.Sprintf("dry run: %d thing(s) would be created, nothing was changed", n)})
		return r.res, nil
	}
	return r.res, r.run(ctx)
}

// launchApp creates what one app lacks, in the order its machines need it.
func (r *run) launchApp(ctx context.Context, role string, a *App) error {
	note := func(st Status, msg string) {
		r.emit(Event{Phase: PhaseLaunch, App: a.Name, Region: a.region(), Status: st, Message: msg})
	}
	created := func(what string) {
		r.res.Created = append(r.res.Created, what)
		verb := "created "
		if r.opts.DryRun {
			verb = "would create "
		}
		note(StatusCreating, verb+what)
	}
	exists, err := r.api.appExists(ctx, a.Name)
	if err != nil {
		return failf(err, "could not read app %s", a.Name)
	}
	if !exists {
		if !r.opts.DryRun {
			if err := r.api.createApp(ctx, a.Name, r.env.Org); err != nil {
				return failf(err, "could not create app %s", a.Name)
			}
		}
		created("app " + a.Name)
	}
	if err := r.launchIPs(ctx, a, exists, created, note); err != nil {
		return err
	}
	secrets, err := r.launchSecrets(ctx, role, a, exists, created)
	if err != nil {
		return err
	}
	before := len(r.res.Created)
	if err := r.launchMachines(ctx, role, a, exists, secrets, created, note); err != nil {
		return err
	}
	if exists && len(r.res.Created) == before {
		note(StatusDone, fmt.Sprintf("present: addresses, SECRET and %d machine(s); nothing to create", a.count()))
	}
	return nil
}

func (r *run) launchIPs(ctx context.Context, a *App, exists bool, created func(string), note func(Status, string)) error {
	want := []string{"shared_v4", "v6"}
	if a.servesUDP() {
		want = []string{"v4"}
	}
	have := map[string]string{}
	if exists {
		ips, err := r.api.ips(ctx, a.Name)
		if err != nil {
			return failf(err, "could not list the addresses of %s", a.Name)
		}
		for _, ip := range ips {
			have[ipKind(ip)] = ip.IP
		}
	}
	for _, kind := range want {
		if have[kind] != "" {
			continue
		}
		addr := "(new)"
		if !r.opts.DryRun {
			ip, err := r.api.assignIP(ctx, a.Name, kind, r.env.Org)
			if err != nil {
				return failf(err, "could not allocate a %s address for %s (run again: launch allocates only what is missing)", kind, a.Name)
			}
			addr = ip.IP
		}
		created(fmt.Sprintf("%s address %s of %s", kind, addr, a.Name))
	}
	if a.servesUDP() && have["shared_v4"] != "" {
		note(StatusWaiting, fmt.Sprintf("%s also has the shared IPv4 %s, which carries no UDP: LiteNetLib clients resolving HOST_DOMAIN to it fail; release it (fly ips release %s -a %s)",
			a.Name, have["shared_v4"], have["shared_v4"], a.Name))
	}
	return nil
}

// launchSecrets sets what the app's machines need and it lacks: SECRET on
// every app, ADMIN_KEY on the balancer (which refuses to start on Fly
// without one). It answers the secrets version it made (0 when it set
// nothing). An existing secret is left alone: its value cannot be read
// back, and a wrong SECRET shows at once in the verification (the relay's
// /ready names a SECRET the balancer refuses).
func (r *run) launchSecrets(ctx context.Context, role string, a *App, exists bool, created func(string)) (uint64, error) {
	want := []string{"SECRET"}
	if role == RoleBalancer {
		want = append(want, "ADMIN_KEY")
	}
	have := map[string]bool{}
	if exists {
		names, err := r.api.secretNames(ctx, a.Name)
		if err != nil {
			return 0, failf(err, "could not list the secrets of %s", a.Name)
		}
		have = names
	}
	values := map[string]*string{}
	for _, name := range want {
		if have[name] {
			continue
		}
		v := r.secret
		if name == "ADMIN_KEY" {
			v = firstNonEmpty(r.env.AdminKey, r.opts.AdminKey)
			if err := checkAdminKey(v, r.secret); err != nil {
				return 0, failf(err, "app %s has no ADMIN_KEY secret", a.Name)
			}
		}
		values[name] = &v
	}
	if len(values) == 0 {
		return 0, nil
	}
	var version uint64
	if !r.opts.DryRun {
		v, err := r.api.setSecrets(ctx, a.Name, values)
		if err != nil {
			return 0, failf(err, "could not set the secrets of %s", a.Name)
		}
		version = v
	}
	for _, name := range want {
		if values[name] != nil {
			created("secret " + name + " of " + a.Name)
		}
	}
	return version, nil
}

// checkAdminKey holds the ADMIN_KEY launch would set to the balancer's
// rules (never printing it): at least 16 characters, printable ASCII
// without spaces, not the relays' SECRET.
func checkAdminKey(key, secret string) error {
	switch {
	case key == "":
		return errors.New("set ADMIN_KEY (the operator's key of the balancer's /v1 API, e.g. ADMIN_KEY=$(openssl rand -hex 32)) and run again")
	case len(key) < 16 || !wire.ValidSecret(key):
		return errors.New("ADMIN_KEY must be at least 16 characters of printable ASCII without spaces")
	case key == secret:
		return errors.New("ADMIN_KEY must not be the relays' SECRET")
	}
	return nil
}

// launchMachines creates machines up to the app's count in its region. A
// new balancer is proven (started, a boot answering /ping) before any relay
// is created, so relays register at once.
func (r *run) launchMachines(ctx context.Context, role string, a *App, exists bool, minSecrets uint64, created func(string), note func(Status, string)) error {
	region := a.region()
	var n int
	if exists {
		ms, err := r.api.list(ctx, a.Name)
		if err != nil {
			return failf(err, "could not list the machines of %s", a.Name)
		}
		ms = live(ms)
		if role == RoleBalancer && len(ms) > 1 {
			return tooManyBalancers(a.Name, ms, "")
		}
		if role == RoleRelay {
			// Retiring machines are not capacity, and a replacement an
			// interrupted rollout left stands for the machine it replaces:
			// the rollout after the launch sorts them out.
			ms, _ = r.sortRelayMachines(*a, ms, &cleanup{})
		}
		if role == RoleBalancer {
			n = len(ms) // one balancer, wherever it runs
		} else {
			here := slices.DeleteFunc(slices.Clone(ms), func(m *fly.Machine) bool { return m.Region != region })
			if other := len(ms) - len(here); other > 0 {
				note(StatusWaiting, fmt.Sprintf("%s has %d machine(s) outside %s: launch counts only those in %s and leaves the others alone", a.Name, other, region, region))
			}
			n = len(here)
		}
		if n > a.count() {
			note(StatusWaiting, fmt.Sprintf("%s has %d machines in %s, more than its count %d: launch removes nothing", a.Name, n, region, a.count()))
		}
	}
	for ; n < a.count(); n++ {
		if r.opts.DryRun {
			created(fmt.Sprintf("machine of %s in %s", a.Name, region))
			continue
		}
		m, err := r.api.launch(ctx, a.Name, region, a.MachineConfig(r.image), minSecrets)
		if err != nil {
			return failf(err, "could not create a machine of %s (run again: launch creates only what is missing)", a.Name)
		}
		created(fmt.Sprintf("machine %s of %s in %s", m.ID, a.Name, region))
		if role != RoleBalancer {
			continue
		}
		// Two launches at once could each have created one: look again.
		if ms, err := r.api.list(ctx, a.Name); err == nil && len(live(ms)) > 1 {
			return tooManyBalancers(a.Name, live(ms), "another launch ran at the same time")
		}
		tg := &target{role: role, app: *a, m: m, res: &MachineResult{Role: role, App: a.Name, Machine: m.ID, Region: region, Image: r.image}}
		vctx, cancel := r.withPhase(ctx)
		_, err = r.verify(vctx, tg, m.Version, "", r.image)
		cancel()
		if err != nil {
			return failf(err, "the new balancer machine %s did not come up", m.ID)
		}
		note(StatusDone, fmt.Sprintf("balancer machine %s is up: creating the relays", m.ID))
	}
	return nil
}
