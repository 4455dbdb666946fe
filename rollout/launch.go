package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	// Every name is checked before anything is created: one taken by
	// another organisation (or a token that cannot reach it) stops the
	// launch with nothing made.
	exists, err := r.appsExist(ctx, apps)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			return nil, err
		}
		return r.res, r.fail(ctx, PhaseLaunch, nil, err)
	}
	for i := range apps {
		role := RoleRelay
		if i == 0 {
			role = RoleBalancer
		}
		if err := r.launchApp(ctx, role, &apps[i], exists[apps[i].Name]); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				return r.res, err
			}
			return r.res, r.fail(ctx, PhaseLaunch, nil, err)
		}
	}
	if opts.DryRun {
		n := len(r.res.Created)
		r.emit(Event{Phase: PhaseDone, Status: StatusDone, Message: fmt.Sprintf("dry run: %d thing(s) would be created, nothing was changed", n)})
		return r.res, nil
	}
	// The relays' new names, like the balancer's, must resolve before
	// the plan reaches their machines through them.
	for _, a := range r.env.Relays {
		if err := r.waitDNS(ctx, a); err != nil {
			return r.res, r.fail(ctx, PhaseLaunch, nil, err)
		}
	}
	return r.res, r.run(ctx)
}

// appsExist reads whether each app exists. A name the Machines API
// refuses (403) is either taken by another organisation or out of the
// token's reach: told apart by the organisation's app list, and either way
// a *ConfigError naming the fix.
func (r *run) appsExist(ctx context.Context, apps []App) (map[string]bool, error) {
	exists := map[string]bool{}
	var forbidden []string
	for _, a := range apps {
		ok, err := r.api.appExists(ctx, a.Name)
		switch {
		case statusOf(err) == http.StatusForbidden:
			forbidden = append(forbidden, a.Name)
		case err != nil:
			return nil, failf(err, "could not read app %s", a.Name)
		default:
			exists[a.Name] = ok
		}
	}
	if len(forbidden) > 0 {
		return nil, r.forbiddenApps(ctx, forbidden)
	}
	return exists, nil
}

// launchApp creates what one app lacks (exists: the app itself is there),
// in the order its machines need it.
func (r *run) launchApp(ctx context.Context, role string, a *App, exists bool) error {
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
	if !exists {
		if !r.opts.DryRun {
			if err := r.api.createApp(ctx, a.Name, r.env.Org); err != nil {
				var ce *ConfigError
				if errors.As(err, &ce) {
					return err
				}
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
	public := 0
	for kind := range have {
		if kind != "private_v6" {
			public++
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
				return failf(err, "could not allocate a %s address for %s", kind, a.Name)
			}
			addr = ip.IP
			if public == 0 {
				// Its first public address: Fly's DNS takes a while to
				// publish the app's name (waitDNS).
				r.newNames[a.Name] = true
			}
			public++
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
		delete(r.stamps, a.Name)
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
	case wire.SecretIn(key, secret):
		return errors.New("ADMIN_KEY must not be a value of the relays' SECRET")
	}
	return nil
}

// launchMachines creates machines up to the app's count in its region. A
// new balancer is proven (started, a boot answering /ping) before any relay
// is created, so relays register at once.
func (r *run) launchMachines(ctx context.Context, role string, a *App, exists bool, minSecrets uint64, created func(string), note func(Status, string)) error {
	region := a.region()
	var n int
	var all []*fly.Machine // the app's live machines, standbys included
	primary := ""          // the balancer machine, once known
	if exists {
		ms, err := r.api.list(ctx, a.Name)
		if err != nil {
			return failf(err, "could not list the machines of %s", a.Name)
		}
		all = live(ms)
		ms = slices.DeleteFunc(slices.Clone(all), isStandby)
		if role == RoleBalancer && len(ms) == 1 {
			primary = ms[0].ID
		}
		if role == RoleBalancer && len(ms) > 1 {
			return tooManyBalancers(a.Name, ms, "")
		}
		if role == RoleRelay {
			// Retiring machines are not capacity, and a replacement an
			// interrupted rollout left stands for the machine it replaces:
			// the rollout after the launch sorts them out.
			ms, _ = r.sortRelayMachines(*a, ms, &cleanup{})
		}
		kept := ms
		if role == RoleBalancer {
			n = len(ms) // one balancer, wherever it runs
		} else {
			here := slices.DeleteFunc(slices.Clone(ms), func(m *fly.Machine) bool { return m.Region != region })
			if other := len(ms) - len(here); other > 0 {
				note(StatusWaiting, fmt.Sprintf("%s has %d machine(s) outside %s: launch counts only those in %s and leaves the others alone", a.Name, other, region, region))
			}
			n, kept = len(here), here
		}
		if r.opts.DryRun {
			for _, m := range kept {
				r.res.Machines = append(r.res.Machines, MachineResult{Role: role, App: a.Name, Machine: m.ID, Region: m.Region,
					State: m.State, FromImage: imageOf(m), Image: imageOf(m), Version: versionOf(m), Action: ActionKeep})
			}
		}
		if n > a.count() {
			note(StatusWaiting, fmt.Sprintf("%s has %d machines in %s, more than its count %d: launch removes nothing", a.Name, n, region, a.count()))
		}
	}
	for ; n < a.count(); n++ {
		if r.opts.DryRun {
			created(fmt.Sprintf("machine %d of %d of %s in %s", n+1, a.count(), a.Name, region))
			r.res.Machines = append(r.res.Machines, MachineResult{Role: role, App: a.Name, Region: region, Image: r.image, Action: ActionCreate})
			continue
		}
		want, err := r.wantConfig(ctx, a)
		if err != nil {
			return err
		}
		m, err := r.api.launch(ctx, a.Name, region, want, minSecrets)
		if err != nil {
			return failf(err, "could not create a machine of %s", a.Name)
		}
		if role == RoleBalancer {
			primary = m.ID
		}
		r.seed[a.Name] = append(r.seed[a.Name], m)
		created(fmt.Sprintf("machine %s of %s in %s", m.ID, a.Name, region))
		if role != RoleBalancer {
			continue
		}
		// Two launches at once could each have created one: look again.
		if ms, err := r.api.list(ctx, a.Name); err == nil && len(live(ms)) > 1 {
			return tooManyBalancers(a.Name, live(ms), "another launch ran at the same time")
		}
		if err := r.waitDNS(ctx, *a); err != nil {
			return err
		}
		tg := &target{role: role, app: *a, m: m, fresh: true,
			res: &MachineResult{Role: role, App: a.Name, Machine: m.ID, Region: region, Image: r.image}}
		r.emit(Event{Phase: PhaseLaunch, App: a.Name, Machine: m.ID, Region: region, Status: StatusVerifying, Image: r.image,
			Message: "new balancer machine " + m.ID + ": waiting for it to start and prove a boot of " + r.image})
		vctx, cancel := r.withPhase(ctx)
		_, err = r.verify(vctx, tg, versionOf(m), "", r.image)
		cancel()
		if err != nil {
			return failf(err, "the new balancer machine %s did not come up", m.ID)
		}
		r.emit(Event{Phase: PhaseLaunch, App: a.Name, Machine: m.ID, Region: region, Status: StatusDone, Image: r.image, Boot: tg.res.Boot,
			Message: fmt.Sprintf("balancer machine %s is up (boot %s): creating its standby, then the relays", m.ID, tg.res.Boot)})
	}
	if role == RoleBalancer && (primary != "" || r.opts.DryRun) {
		// Once the primary is proven: a standby of a machine that never
		// came up would stand by for nothing.
		return r.launchStandby(ctx, a, primary, all, created)
	}
	return nil
}
