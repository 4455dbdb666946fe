package flysim

import (
	"fmt"
	"net"
	"strconv"
)

// PortSpan is how many ports a config spans from its port_base: the
// Machines API, the proxies, the public UDP ports and DNS of fly/sim.toml
// (4280 to 5353) lie within it.
const PortSpan = 1100

// MovePorts moves a config written for port_base to another port base, so
// that a second Sim runs beside the first (`purrctl sim --port-base`):
// every port from the old base to PortSpan above it moves by the
// difference, in the listen addresses (Machines API, DNS, proxies, links),
// the public UDP ports and the env values that are such a port (an app's
// HOST_WS_PORT, HOST_UDP_PORT_V2). Call it before New.
func (c *Config) MovePorts(base int) error {
	if c.PortBase == 0 {
		return fmt.Errorf("the config has no port_base: its ports cannot be moved")
	}
	if base < 1024 || base > 65535-PortSpan {
		return fmt.Errorf("port base %d out of range (1024 to %d)", base, 65535-PortSpan)
	}
	d := base - c.PortBase
	move := func(p int) int {
		if p >= c.PortBase && p < c.PortBase+PortSpan {
			return p + d
		}
		return p
	}
	moveAddr := func(a *string) {
		host, port, err := net.SplitHostPort(*a)
		if err != nil {
			return
		}
		if p, err := strconv.Atoi(port); err == nil {
			*a = net.JoinHostPort(host, strconv.Itoa(move(p)))
		}
	}
	moveEnv := func(env map[string]string) {
		for k, v := range env {
			if p, err := strconv.Atoi(v); err == nil && strconv.Itoa(p) == v {
				env[k] = strconv.Itoa(move(p))
			}
		}
	}
	moveAddr(&c.MachinesAPI)
	moveAddr(&c.DNS)
	for _, l := range c.Links {
		if l != nil {
			moveAddr(&l.Listen)
		}
	}
	for _, a := range c.Apps {
		if a == nil {
			continue
		}
		moveAddr(&a.Proxy)
		moveEnv(a.Env)
		for _, u := range a.UDP {
			if u != nil {
				u.Port = move(u.Port)
			}
		}
		for _, m := range a.Machines {
			if m != nil {
				moveEnv(m.Env)
			}
		}
	}
	c.PortBase = base
	return nil
}
