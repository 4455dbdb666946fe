// Package flyenv reads what Fly.io tells a machine about itself through its
// environment (FLY_APP_NAME, FLY_MACHINE_ID, FLY_REGION, FLY_IMAGE_REF,
// FLY_PRIVATE_IP, and FLY_DNS_SERVER, flysim's convention for the internal
// resolver), in one place, as litefs keeps its Fly environment in one
// file. The commands read it once and pass plain values on; nothing else
// reads these variables. Off Fly every field is empty and OnFly is false.
package flyenv

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// GlobalServices is the name of the address a Fly machine must answer UDP
// from (Fly routes the replies of that one back through its edge).
const GlobalServices = "fly-global-services"

// Environment is the machine's Fly facts (Fly's documented machine runtime environment).
type Environment struct {
	AppName   string // FLY_APP_NAME: set on every Fly machine
	MachineID string // FLY_MACHINE_ID (= FLY_ALLOC_ID)
	Region    string // FLY_REGION: where the machine runs
	ImageRef  string // FLY_IMAGE_REF
	PrivateIP string // FLY_PRIVATE_IP: the machine's 6PN address
	DNSServer string // FLY_DNS_SERVER: host:port of the internal resolver ("" = Fly's fdaa::3)
}

// Read reads the environment through getenv (os.Getenv, or a test's map).
func Read(getenv func(string) string) Environment {
	return Environment{
		AppName:   getenv("FLY_APP_NAME"),
		MachineID: getenv("FLY_MACHINE_ID"),
		Region:    getenv("FLY_REGION"),
		ImageRef:  getenv("FLY_IMAGE_REF"),
		PrivateIP: getenv("FLY_PRIVATE_IP"),
		DNSServer: getenv("FLY_DNS_SERVER"),
	}
}

// OnFly reports whether this process runs on a Fly machine.
func (e Environment) OnFly() bool { return e.AppName != "" }

// PublicHost is the app's public name, <app>.fly.dev ("" off Fly).
func (e Environment) PublicHost() string {
	if !e.OnFly() {
		return ""
	}
	return e.AppName + ".fly.dev"
}

// PrivateAddr parses FLY_PRIVATE_IP; ok is false when it is unset.
func (e Environment) PrivateAddr() (addr netip.Addr, ok bool, err error) {
	if e.PrivateIP == "" {
		return netip.Addr{}, false, nil
	}
	a, err := netip.ParseAddr(e.PrivateIP)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("FLY_PRIVATE_IP %q is not an IP address", e.PrivateIP)
	}
	return a, true, nil
}

// GlobalServicesAddr resolves GlobalServices to its IPv4 address.
func GlobalServicesAddr(ctx context.Context, r *net.Resolver) (string, error) {
	ips, err := r.LookupNetIP(ctx, "ip4", GlobalServices)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("%s has no IPv4 address", GlobalServices)
	}
	return ips[0].String(), nil
}
