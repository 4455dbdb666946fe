package main

import (
	"maps"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// TestPlacementSettingsReachTheOptions: RELAY_LABELS, RELAY_MAX_ROOMS and
// RELAY_MAX_CONNECTIONS become the relay's Labels and Capacity (unset: no
// label, no limit); BALANCER_PLACEMENT is the balancer's strategy
// (unset: least).
func TestPlacementSettingsReachTheOptions(t *testing.T) {
	for _, v := range []string{"RELAY_LABELS", "RELAY_MAX_ROOMS", "RELAY_MAX_CONNECTIONS", "BALANCER_PLACEMENT", "FLY_APP_NAME"} {
		unsetenv(t, v)
	}
	if o := relayOpts(t); o.Labels != nil || o.Capacity != (wire.Capacity{}) {
		t.Fatalf("unset: labels %v capacity %+v, want none", o.Labels, o.Capacity)
	}
	t.Setenv("RELAY_LABELS", "tier=pro, zone=eu-1")
	t.Setenv("RELAY_MAX_ROOMS", "50")
	t.Setenv("RELAY_MAX_CONNECTIONS", "2000")
	o := relayOpts(t)
	if !maps.Equal(o.Labels, map[string]string{"tier": "pro", "zone": "eu-1"}) || o.Capacity != (wire.Capacity{MaxRooms: 50, MaxConnections: 2000}) {
		t.Fatalf("set: labels %v capacity %+v", o.Labels, o.Capacity)
	}
	if o := relayOpts(t, "--labels", "gpu=yes", "--capacity-rooms", "0"); !maps.Equal(o.Labels, map[string]string{"gpu": "yes"}) || o.Capacity.MaxRooms != 0 {
		t.Fatalf("flags over env: labels %v capacity %+v", o.Labels, o.Capacity)
	}

	strategy := func(t *testing.T) balancer.Strategy {
		t.Helper()
		var st balancer.Strategy
		if err := runAction(t, balancerCommand(), func(c *cli.Context) error {
			var err error
			st, err = balancer.ParseStrategy(c.String("placement"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := strategy(t); st != balancer.StrategyLeast {
		t.Fatalf("unset BALANCER_PLACEMENT: %q, want least", st)
	}
	t.Setenv("BALANCER_PLACEMENT", "random")
	if st := strategy(t); st != balancer.StrategyRandom {
		t.Fatalf("BALANCER_PLACEMENT=random: %q", st)
	}
}

// TestUDPHoldReachesTheOptions: UDP_HOLD_US becomes the relay's UDPHold
// in microseconds; unset is 0 (the relay's default), -1 holds no peer.
func TestUDPHoldReachesTheOptions(t *testing.T) {
	unsetenv(t, "UDP_HOLD_US")
	hold := func(t *testing.T, args ...string) time.Duration { return relayOpts(t, args...).UDPHold }
	if got := hold(t); got != 0 {
		t.Errorf("unset: %v, want 0", got)
	}
	t.Setenv("UDP_HOLD_US", "250")
	if got := hold(t); got != 250*time.Microsecond {
		t.Errorf("UDP_HOLD_US=250: %v", got)
	}
	if got := hold(t, "--udp-hold", "-1"); got >= 0 {
		t.Errorf("--udp-hold -1: %v, want negative (no peer waits)", got)
	}
}

// TestUDPPortsNotServed: -1 turns off either LiteNetLib port, as the help
// says (UDP_PORT=-1 was refused as "not a port number").
func TestUDPPortsNotServed(t *testing.T) {
	unsetenv(t, "UDP_PORT")
	unsetenv(t, "UDP_PORT_V2")
	if o := relayOpts(t, "--udp-port", "-1"); o.UDPPort != -1 || o.UDPPortV2 != 7778 {
		t.Errorf("--udp-port -1: UDPPort %d, UDPPortV2 %d", o.UDPPort, o.UDPPortV2)
	}
	if o := relayOpts(t, "--udp-port-v2", "-1"); o.UDPPort != 7777 || o.UDPPortV2 != -1 {
		t.Errorf("--udp-port-v2 -1: UDPPort %d, UDPPortV2 %d", o.UDPPort, o.UDPPortV2)
	}
}

// relayOpts runs the relay command's flag parsing on args and the
// environment and returns the relay's options.
func relayOpts(t *testing.T, args ...string) relay.Options {
	t.Helper()
	var o relay.Options
	if err := runAction(t, relayCommand(), func(c *cli.Context) error {
		var err error
		o, err = relayOptions(c)
		return err
	}, args...); err != nil {
		t.Fatal(err)
	}
	return o
}
