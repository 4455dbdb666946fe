package rollout

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// PortSpan is how many ports an emulator's environment spans from its
// port_base: its Machines API, proxies and public UDP ports (and those of
// `purrctl sim`'s config, which moves the same way).
const PortSpan = 1100

// MovePorts moves an emulator's environment (one with port_base) to
// another port base, as `purrctl sim --port-base` moves the emulator:
// every port from the old base to PortSpan above it, in machines_api, the
// apps' urls and the env values (relay_env, each app's env) that are such
// a port, moves by the difference. Call Validate afterwards.
func (e *Env) MovePorts(base int) error {
	if e.PortBase == 0 {
		return fmt.Errorf("environment %s has no port_base: only an emulator's ports move", e.Name)
	}
	if base < 1024 || base > 65535-PortSpan {
		return fmt.Errorf("port base %d out of range (1024 to %d)", base, 65535-PortSpan)
	}
	d := base - e.PortBase
	move := func(p int) int {
		if p >= e.PortBase && p < e.PortBase+PortSpan {
			return p + d
		}
		return p
	}
	moveURL := func(s *string) {
		if *s == "" {
			return
		}
		u, perr := url.Parse(*s)
		if perr != nil || u.Port() == "" {
			return
		}
		p, _ := strconv.Atoi(u.Port())
		u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(move(p)))
		*s = u.String()
	}
	moveEnv := func(env map[string]string) {
		for k, v := range env {
			if p, perr := strconv.Atoi(v); perr == nil && strconv.Itoa(p) == v {
				env[k] = strconv.Itoa(move(p))
			}
		}
	}
	moveURL(&e.MachinesAPI)
	moveURL(&e.Balancer.URL)
	moveEnv(e.RelayEnv)
	moveEnv(e.Balancer.Env)
	for i := range e.Relays {
		moveURL(&e.Relays[i].URL)
		moveEnv(e.Relays[i].Env)
	}
	e.PortBase = base
	return nil
}
