package relay

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsDefaults: every zero (or negative) setting gets its
// documented default, the UDP socket binds where the HTTP ports do unless
// told otherwise, and a wildcard of either family binds every IPv4
// address (LiteNetLib's socket).
func TestOptionsDefaults(t *testing.T) {
	o, err := Options{Secret: "s"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]any{
		"UDPPort":             {o.UDPPort, 0}, // the caller applies 7777; 0 binds any free port
		"UDPSockets":          {o.UDPSockets, 1},
		"UDPTimeout":          {o.UDPTimeout, DefaultUDPTimeout},
		"UDPFlush":            {o.UDPFlush, time.Duration(0)}, // the busy rule
		"UDPHold":             {o.UDPHold, time.Duration(0)},  // its default wait
		"HeartbeatInterval":   {o.HeartbeatInterval, DefaultHeartbeatInterval},
		"EmptyRoomTimeout":    {o.EmptyRoomTimeout, DefaultEmptyRoomTimeout},
		"HostConnectTimeout":  {o.HostConnectTimeout, DefaultHostConnectTimeout},
		"DrainTimeout":        {o.DrainTimeout, DefaultDrainTimeout},
		"AuthTimeout":         {o.AuthTimeout, DefaultAuthTimeout},
		"MessageTimeout":      {o.MessageTimeout, DefaultMessageTimeout},
		"MaxRooms":            {o.MaxRooms, DefaultMaxRooms},
		"MaxPending":          {o.MaxPending, DefaultMaxPending},
		"MaxPendingPerSource": {o.MaxPendingPerSource, DefaultMaxPendingPerSource},
		"RequestTimeout":      {o.RequestTimeout, DefaultRequestTimeout},
		"LocateTTL":           {o.LocateTTL, DefaultLocateTTL},
		"ForwardTimeout":      {o.ForwardTimeout, DefaultForwardTimeout},
		"UDPHost":             {o.UDPHost, "0.0.0.0"},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %v, want %v", name, got[0], got[1])
		}
	}
	if o.Logger == nil || o.Clock == nil || o.Metrics == nil || len(o.BootID) != 32 {
		t.Errorf("logger %v clock %v metrics %v boot %q: want all set", o.Logger, o.Clock, o.Metrics, o.BootID)
	}
	neg, err := Options{Secret: "s", UDPTimeout: -1, MaxRooms: -1, MaxPending: -1, MaxPendingPerSource: -1,
		AuthTimeout: -1, HeartbeatInterval: -1, RequestTimeout: -time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if neg.UDPTimeout != DefaultUDPTimeout || neg.MaxRooms != DefaultMaxRooms || neg.MaxPending != DefaultMaxPending ||
		neg.MaxPendingPerSource != DefaultMaxPendingPerSource || neg.AuthTimeout != DefaultAuthTimeout ||
		neg.HeartbeatInterval != DefaultHeartbeatInterval || neg.RequestTimeout != DefaultRequestTimeout {
		t.Errorf("negative settings kept: %+v", neg)
	}
	for _, tc := range []struct{ listen, udp, want string }{
		{"127.0.0.2", "", "127.0.0.2"},
		{"127.0.0.2", "127.0.0.5", "127.0.0.5"},
		{"::", "", "0.0.0.0"},
		{"", "::", "0.0.0.0"},
		{"0.0.0.0", "", "0.0.0.0"},
		{"", "::1", "::1"},
	} {
		o, err := Options{Secret: "s", ListenHost: tc.listen, UDPHost: tc.udp, UDPSockets: 3}.withDefaults()
		if err != nil || o.UDPHost != tc.want || o.UDPSockets != 3 {
			t.Errorf("listen %q udp %q: UDP host %q, sockets %d (%v); want %q, 3", tc.listen, tc.udp, o.UDPHost, o.UDPSockets, err, tc.want)
		}
	}
}

// TestOptionsRefused: settings that cannot work are refused with a reason,
// before anything is bound.
func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "shared secret"},
		{Options{Secret: "has space"}, "shared secret"},
		{Options{Secret: "s", BalancerURL: "ftp://b"}, "balancer URL"},
		{Options{Secret: "s", BalancerURL: "http://"}, "balancer URL"},
		{Options{Secret: "s", BalancerURL: "b.fly.dev"}, "balancer URL"},
		{Options{Secret: "s", Endpoint: "ws://e"}, "endpoint"},
		{Options{Secret: "s", PublicEndpoint: "https://"}, "endpoint"},
		{Options{Secret: "s", MultiMachine: true}, "multi-machine"},
		{Options{Secret: "s", HTTPPort: 65536}, "HTTP port"},
		{Options{Secret: "s", UDPSockets: 65}, "UDP sockets"},
		{Options{Secret: "s", UDPHold: MaxUDPHold + 1}, "UDP hold"},
		{Options{Secret: "s", Region: strings.Repeat("r", 65)}, "region"},
	} {
		if _, err := tc.o.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.o, err, tc.want)
		}
	}
	for _, u := range []string{"http://b", "https://b:8443/x"} {
		if _, err := (Options{Secret: "s", BalancerURL: u, Endpoint: u}).withDefaults(); err != nil {
			t.Errorf("balancer and endpoint %s refused: %v", u, err)
		}
	}
}

// TestUDPBusyWait: what the UDP endpoint is told to hold a busy peer for
// (litenet.Config.BusyWait): the default millisecond, an operator's own
// hold (UDP_HOLD_US), nothing when the hold is off, and nothing under a
// fixed wait (UDP_FLUSH_MS), which merges every peer's frames itself.
func TestUDPBusyWait(t *testing.T) {
	for _, tc := range []struct{ flush, hold, want time.Duration }{
		{0, 0, DefaultUDPBusyWait},
		{0, 250 * time.Microsecond, 250 * time.Microsecond},
		{0, MaxUDPHold, MaxUDPHold},
		{0, -1, 0},
		{10 * time.Millisecond, 0, 0},
		{10 * time.Millisecond, 2 * time.Millisecond, 0},
		{-1, 0, 0},
	} {
		if got := udpBusyWait(tc.flush, tc.hold); got != tc.want {
			t.Errorf("flush %v hold %v: busy wait %v, want %v", tc.flush, tc.hold, got, tc.want)
		}
	}
}
