package main

import (
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/flysim"
)

// TestSimSeedsOnlyTheDefaultOrganisation: `purrctl sim` starts fly/sim.toml's
// machines on the config fly/rollout.toml's sim environment deploys, but
// another --config (fly/chaos.toml, which `purrctl chaos --state` attaches
// to, has the same app names) keeps its own machines' configs unless
// --rollout-config is given: seeded from rollout.toml, the chaos relays'
// BALANCER_URL would be the default sim's balancer, not their fault links.
func TestSimSeedsOnlyTheDefaultOrganisation(t *testing.T) {
	t.Chdir("../..") // the default paths are relative to the repository root
	for _, tc := range []struct {
		args []string
		seed bool
	}{
		{nil, true},
		{[]string{"--config", "./fly/sim.toml"}, true},
		{[]string{"--config", "fly/chaos.toml"}, false},
		{[]string{"--config", "fly/chaos.toml", "--rollout-config", "fly/rollout.toml"}, true},
		{[]string{"--rollout-config", ""}, false},
	} {
		var cfg *flysim.Config
		err := runAction(t, simCommand(), func(c *cli.Context) error {
			var err error
			if cfg, err = flysim.LoadConfig(c.String("config")); err != nil {
				return err
			}
			return seedFromRollout(c, cfg)
		}, tc.args...)
		if err != nil {
			t.Fatalf("purrctl sim %q: %v", tc.args, err)
		}
		for _, a := range cfg.Apps {
			if got := a.Seed != nil; got != tc.seed {
				t.Errorf("purrctl sim %q: app %s seeded from fly/rollout.toml: %v, want %v", tc.args, a.Name, got, tc.seed)
			}
		}
	}
}
