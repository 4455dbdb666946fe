package flysim

import (
	"fmt"
	"net"
	"strconv"
)

// UDPService is one UDP service of an app, fly.toml's
//
//	[[services]]
//	  protocol = "udp"
//	  internal_port = N
//	  [[services.ports]]
//	    port = N
//
// written in the Sim's config as
//
//	[[apps.udp]]
//	internal_port = 7778 # every machine binds <its ip>:7778 (Fly: fly-global-services:7778)
//	port = 4401          # public port, on the app's public IP (the host of its proxy address)
type UDPService struct {
	// InternalPort is the port every machine of the app binds on its own
	// loopback address and receives the service's datagrams on.
	InternalPort int `toml:"internal_port"`
	// Port is the public port clients send to, on the app's public IP: the
	// host of the app's proxy address (all apps share 127.0.0.1, so unlike
	// Fly it is not the internal port). Default 0: any free port, read back
	// from State.
	Port int `toml:"port"`
}

// validateUDP checks the app's UDP services: ports in range, no internal or
// public port twice.
func (a *AppConfig) validateUDP() error {
	internal := map[int]bool{}
	public := map[int]bool{}
	for i, u := range a.UDP {
		if u == nil {
			return fmt.Errorf("udp service %d is empty", i)
		}
		if u.InternalPort <= 0 || u.InternalPort > 65535 {
			return fmt.Errorf("udp service %d: internal_port %d out of range", i, u.InternalPort)
		}
		if u.Port < 0 || u.Port > 65535 {
			return fmt.Errorf("udp service %d: port %d out of range", i, u.Port)
		}
		if internal[u.InternalPort] {
			return fmt.Errorf("udp internal_port %d appears twice", u.InternalPort)
		}
		internal[u.InternalPort] = true
		if u.Port != 0 {
			if public[u.Port] {
				return fmt.Errorf("udp port %d appears twice", u.Port)
			}
			public[u.Port] = true
		}
	}
	return nil
}

// validateUDPAddrs refuses two apps whose UDP services would listen on the
// same public address (their proxies share a host and the ports are equal).
func (c *Config) validateUDPAddrs() error {
	owner := map[string]string{}
	for _, a := range c.Apps {
		for _, u := range a.UDP {
			if u.Port == 0 {
				continue
			}
			addr := a.udpListenAddr(u)
			if prev, ok := owner[addr]; ok {
				return fmt.Errorf("app %s: udp address %s is already the one of app %s", a.Name, addr, prev)
			}
			owner[addr] = a.Name
		}
	}
	return nil
}

// udpListenAddr is where the public side of u listens: the app's public IP
// (its proxy's host, as one Fly app has one dedicated IPv4 for HTTP and UDP)
// at u's public port.
func (a *AppConfig) udpListenAddr(u *UDPService) string {
	host, _, _ := net.SplitHostPort(a.Proxy) // validated
	return net.JoinHostPort(host, strconv.Itoa(u.Port))
}
