package rollout_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"

	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/rollout"
)

// launchFleet is an empty emulated organisation (fly/sim.toml's apps
// reserved, none created) on the platform fly/sim.toml ships (every
// behaviour of Fly's at its shipped delay) and fly/rollout.toml's sim
// environment pointed at it, with test timings.
func launchFleet(t *testing.T) *fleet { return launchFleetWith(t, "", true) }

// launchFleetWith uses relayConfig (a path) as the relay template instead
// of fly/relay.toml when it is not empty, on the shipped platform or (not
// asShipped) the suite's shorter delays.
func launchFleetWith(t *testing.T, relayConfig string, asShipped bool) *fleet {
	return launchFleetTweak(t, relayConfig, asShipped, nil)
}

// launchFleetTweak is launchFleetWith with a last change to the sim's config.
func launchFleetTweak(t *testing.T, relayConfig string, asShipped bool, tweak func(*flysim.Config)) *fleet {
	t.Helper()
	f := startFleetOf(t, func(c *flysim.Config) {
		c.Empty()
		if asShipped {
			shipped(t, c)
		}
		if tweak != nil {
			tweak(c)
		}
	}, true)
	file, err := rollout.LoadFile("../fly/rollout.toml")
	if err != nil {
		t.Fatal(err)
	}
	env, err := file.Env("sim")
	if err != nil {
		t.Fatal(err)
	}
	env.MachinesAPI, env.Token, env.Timeouts = f.env.MachinesAPI, f.env.Token, f.env.Timeouts
	if env.AdminKey == "" {
		t.Fatal("fly/rollout.toml's sim environment pins no admin_key")
	}
	env.Balancer.URL = f.sim.AppURL(env.Balancer.Name)
	for i := range env.Relays {
		env.Relays[i].URL = f.sim.AppURL(env.Relays[i].Name)
	}
	env.RelayEnv["HEARTBEAT_SECONDS"], env.RelayEnv["DRAIN_TIMEOUT_SECONDS"] = "1", "1"
	if relayConfig != "" {
		env.RelayConfig = relayConfig
	}
	if err := env.Validate(); err != nil {
		t.Fatal(err)
	}
	f.env = env
	f.apps = []string{"purrfly-relay-a", "purrfly-relay-b", multiApp, "purrfly-balancer"}
	return f
}

// The whole first deploy against the emulator as shipped (Fly's
// unkindness on: lagging lists, 404s after a create, rate limits, a new
// app's late DNS, the on-failure restart default, no machine version):
// an empty organisation becomes the fleet the tomls describe in one pass,
// smoke passes, a second launch creates nothing, and a rollout after it
// succeeds.
func TestLaunchBuildsTheFleetFromTheTomls(t *testing.T) {
	t.Parallel()
	f := launchFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := rollout.Launch(ctx, f.opts("purrfly:v1"))
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	created := strings.Join(res.Created, "\n")
	for _, want := range []string{
		"app purrfly-balancer", "shared_v4 address", "v6 address", "secret SECRET of purrfly-balancer", "secret ADMIN_KEY of purrfly-balancer",
		"app purrfly-relay-a", "v4 address", "secret SECRET of purrfly-relay-multi",
	} {
		if !strings.Contains(created, want) {
			t.Errorf("launch did not report %q; created:\n%s", want, created)
		}
	}
	if strings.Index(created, "of purrfly-balancer in ams") > strings.Index(created, "app purrfly-relay-a") {
		t.Errorf("relays were created before the balancer machine:\n%s", created)
	}
	if n := strings.Count(created, "machine "); n != 7 {
		t.Errorf("%d machines created, want 7 (1 balancer and its standby, 1 + 1 + 3 relays):\n%s", n, created)
	}
	if !strings.Contains(created, "standby machine ") {
		t.Errorf("launch created no standby balancer:\n%s", created)
	}
	if len(res.SmokeRegions) == 0 {
		t.Errorf("no smoke region passed: %+v", res)
	}
	for _, m := range res.Machines {
		if m.Action != rollout.ActionVerified {
			t.Errorf("machine %s of %s: %s, want verified", m.Machine, m.App, m.Action)
		}
	}
	// Relay apps serve UDP: a dedicated IPv4 and no other public address.
	ips, err := f.fc.GetIPAssignments(ctx, "purrfly-relay-a")
	if err != nil || len(ips.IPs) != 1 || ips.IPs[0].Shared || strings.Contains(ips.IPs[0].IP, ":") {
		t.Errorf("relay-a addresses: %+v %v", ips, err)
	}
	// The machines run the toml: the relay template's env and checks.
	ms, err := f.fc.List(ctx, "purrfly-relay-b", "")
	if err != nil || len(ms) != 1 {
		t.Fatalf("relay-b machines: %d %v", len(ms), err)
	}
	c := ms[0].Config
	if c.Env["UDP_PORT_V2"] != "7778" || c.Env["HOST_UDP_PORT_V2"] != "4402" || ms[0].Region != "sea" || c.Checks["ready"].HTTPPath == nil {
		t.Errorf("relay-b config: region %s env %v checks %v", ms[0].Region, c.Env, c.Checks)
	}

	again, err := rollout.Launch(ctx, f.opts("purrfly:v1"))
	if err != nil {
		t.Fatalf("second launch: %v", err)
	}
	if len(again.Created) != 0 {
		t.Errorf("second launch created %v", again.Created)
	}
	for _, m := range again.Machines {
		if m.Action != rollout.ActionVerified || len(m.Changes) != 0 {
			t.Errorf("second launch: machine %s of %s %s %v", m.Machine, m.App, m.Action, m.Changes)
		}
	}
	for _, app := range f.apps {
		ms, _ := f.fc.List(ctx, app, "")
		for _, m := range ms {
			if n := updates(m); n != 0 {
				t.Errorf("machine %s of %s was updated %d times by launch", m.ID, app, n)
			}
		}
	}

	// `purrctl rollout sim --image purrfly:v2` after it.
	out, err := rollout.Run(ctx, f.overlap("purrfly:v2"))
	if err != nil {
		t.Fatalf("rollout after the launch: %v", err)
	}
	for _, m := range out.Machines {
		want := rollout.ActionReplaced
		if m.Role == rollout.RoleBalancer {
			want = rollout.ActionUpdated
		}
		if m.Action != want || m.Image != "purrfly:v2" {
			t.Errorf("rollout after the launch: machine %s of %s %s on %s, want %s on purrfly:v2", m.Machine, m.App, m.Action, m.Image, want)
		}
	}
	if len(out.SmokeRegions) == 0 {
		t.Errorf("rollout after the launch: no smoke region passed")
	}
}

// An edit of the relay template's env reaches every relay machine through
// rollout, one machine at a time, each proven by a new boot; the balancer,
// whose toml did not change, is verified, not redeployed.
func TestRolloutDeploysAConfigEdit(t *testing.T) {
	t.Parallel()
	// fly/relay.toml with short check grace periods: each of the five
	// relay machines waits for its checks to pass before the next one.
	b, err := os.ReadFile("../fly/relay.toml")
	if err != nil {
		t.Fatal(err)
	}
	fast := regexp.MustCompile(`grace_period = "[0-9]+s"`).ReplaceAll(b, []byte(`grace_period = "200ms"`))
	if bytes.Equal(fast, b) {
		t.Fatal("fly/relay.toml has no grace_period to shorten")
	}
	tmpl := filepath.Join(t.TempDir(), "relay.toml")
	if err := os.WriteFile(tmpl, fast, 0o644); err != nil {
		t.Fatal(err)
	}
	f := launchFleetWith(t, tmpl, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := rollout.Launch(ctx, f.opts("purrfly:v1")); err != nil {
		t.Fatalf("launch: %v", err)
	}
	before := map[string]string{}
	for _, app := range f.apps[:3] {
		ms, _ := f.fc.List(ctx, app, "")
		for _, m := range ms {
			before[m.ID] = ping(t, f, app, m.ID).BootID
		}
	}
	// Edit a value of the template on disk, as an operator edits
	// fly/relay.toml, and reload it.
	edited := bytes.Replace(fast, []byte(`GOMEMLIMIT = "430MiB"`), []byte(`GOMEMLIMIT = "400MiB"`), 1)
	if bytes.Equal(edited, fast) {
		t.Fatal("fly/relay.toml has no GOMEMLIMIT = \"430MiB\" to edit")
	}
	if err := os.WriteFile(tmpl, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.env.Validate(); err != nil {
		t.Fatal(err)
	}
	dry := f.opts("purrfly:v1")
	dry.DryRun = true
	plan, err := rollout.Run(ctx, dry)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for _, m := range plan.Machines {
		want := m.Role == rollout.RoleRelay
		if got := slices.Contains(m.Changes, `env.GOMEMLIMIT: "430MiB" -> "400MiB"`); got != want || (m.Action == rollout.ActionUpdate) != want {
			t.Errorf("dry run: machine %s of %s: %s %v", m.Machine, m.App, m.Action, m.Changes)
		}
	}
	var events []rollout.Event
	opts := f.opts("purrfly:v1")
	opts.Observer = func(ev rollout.Event) { events = append(events, ev) }
	res, err := rollout.Run(ctx, opts)
	if err != nil {
		t.Fatalf("rollout: %v", err)
	}
	for _, m := range res.Machines {
		want := rollout.ActionUpdated
		if m.Role == rollout.RoleBalancer {
			want = rollout.ActionVerified
		}
		if m.Action != want {
			t.Errorf("machine %s of %s: %s, want %s", m.Machine, m.App, m.Action, want)
		}
	}
	for _, app := range f.apps[:3] {
		ms, _ := f.fc.List(ctx, app, "")
		for _, m := range ms {
			if m.Config.Env["GOMEMLIMIT"] != "400MiB" {
				t.Errorf("machine %s of %s: env %v", m.ID, app, m.Config.Env)
			}
			if boot := ping(t, f, app, m.ID).BootID; boot == before[m.ID] {
				t.Errorf("machine %s of %s still runs boot %s", m.ID, app, boot)
			}
		}
	}
	// One at a time: a relay's update starts only after the previous one is done.
	open := ""
	for _, ev := range events {
		switch {
		case ev.Machine == "" || ev.Phase == rollout.PhasePlan:
		case ev.Status == rollout.StatusUpdating:
			if open != "" {
				t.Errorf("machine %s updated while %s was not done", ev.Machine, open)
			}
			open = ev.Machine
		case ev.Status == rollout.StatusDone && ev.Machine == open:
			open = ""
		}
	}
	f.noLeases(t)
}

// Launch after failures: a dry run creates nothing; a create whose answer
// was lost is found by the key launch gave it (never made twice) and an
// address the API refused once is read back and asked for again, so the
// launch goes through in one pass; a second balancer machine stops it
// with the fix named.
func TestLaunchConvergesAfterFailures(t *testing.T) {
	t.Parallel()
	f := launchFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dry := f.opts("purrfly:v1")
	dry.DryRun = true
	plan, err := rollout.Launch(ctx, dry)
	if err != nil || len(plan.Created) == 0 {
		t.Fatalf("dry run: %v %+v", err, plan)
	}
	if !strings.Contains(strings.Join(plan.Created, "\n"), "standby machine of purrfly-balancer") {
		t.Errorf("the dry run does not list the balancer's standby:\n%s", strings.Join(plan.Created, "\n"))
	}
	if _, err := f.fc.GetApp(ctx, "purrfly-balancer"); err == nil {
		t.Fatal("a dry run created the balancer app")
	}

	// No ADMIN_KEY: the balancer would refuse to start on Fly, so launch
	// stops before its machine, saying what to set (and never a key).
	key := f.env.AdminKey
	f.env.AdminKey = ""
	_, err = rollout.Launch(ctx, f.opts("purrfly:v1"))
	f.env.AdminKey = key
	var noKey *rollout.Failure
	if !errors.As(err, &noKey) || !strings.Contains(noKey.Error(), "set ADMIN_KEY") {
		t.Fatalf("launch without an ADMIN_KEY: %v", err)
	}
	if ms, err := f.fc.List(ctx, "purrfly-balancer", ""); err != nil || len(ms) != 0 {
		t.Fatalf("launch without an ADMIN_KEY created %d balancer machines (%v)", len(ms), err)
	}

	for _, fault := range []flysim.Fault{
		{Action: "create", App: "purrfly-balancer", DropResponse: true},
		{Action: "create", App: "purrfly-relay-a", DropResponse: true},
		{Action: "create", App: multiApp, Status: 503},
		{Action: "assign_ip", App: "purrfly-relay-b", Status: 500},
		{Action: "assign_ip", App: "purrfly-relay-a", DropResponse: true},
	} {
		if err := f.sim.InjectFault(fault); err != nil {
			t.Fatal(err)
		}
	}
	res, err := rollout.Launch(ctx, f.opts("purrfly:v1"))
	if err != nil {
		t.Fatalf("launch through lost and refused creates: %v", err)
	}
	if len(res.SmokeRegions) == 0 {
		t.Errorf("launch: no smoke region passed")
	}
	if n := strings.Count(strings.Join(res.Created, "\n"), "v4 address"); n != 3 {
		t.Errorf("launch reported %d v4 addresses, want one per relay app: %v", n, res.Created)
	}
	for _, app := range []string{"purrfly-relay-a", "purrfly-relay-b"} {
		if ips, err := f.fc.GetIPAssignments(ctx, app); err != nil || len(ips.IPs) != 1 {
			t.Errorf("%s: addresses %+v (%v), want one", app, ips, err)
		}
	}
	for app, want := range map[string]int{"purrfly-balancer": 2, "purrfly-relay-a": 1, "purrfly-relay-b": 1, multiApp: 3} { // the balancer: a primary and its standby
		if ms, err := f.fc.List(ctx, app, ""); err != nil || len(ms) != want {
			t.Errorf("%s: %d machines (%v), want %d", app, len(ms), err, want)
		}
	}

	bal, err := f.fc.List(ctx, "purrfly-balancer", "")
	bal = slices.DeleteFunc(bal, func(m *fly.Machine) bool { return len(m.Config.Standbys) > 0 })
	if err != nil || len(bal) != 1 {
		t.Fatalf("balancer machines besides the standby: %d %v", len(bal), err)
	}
	clone, err := f.fc.Launch(ctx, "purrfly-balancer", fly.LaunchMachineInput{Region: bal[0].Region, Config: bal[0].Config, SkipLaunch: true})
	if err != nil {
		t.Fatal(err)
	}
	f.listed(t, "purrfly-balancer", 3) // a launch sees what Fly's list shows
	_, err = rollout.Launch(ctx, f.opts("purrfly:v1"))
	var fl *rollout.Failure
	if !errors.As(err, &fl) || !strings.Contains(fl.Reason, "must run exactly one") || !strings.Contains(fl.Reason, clone.ID) {
		t.Fatalf("want launch refused over two balancers, got %v", err)
	}
}
