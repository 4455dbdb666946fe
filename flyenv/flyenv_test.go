package flyenv

import (
	"context"
	"net"
	"testing"
)

func TestReadOnAndOffFly(t *testing.T) {
	env := map[string]string{"FLY_APP_NAME": "purrfly-relay-a", "FLY_MACHINE_ID": "148e21dad76789", "FLY_REGION": "ams",
		"FLY_IMAGE_REF": "registry.fly.io/purrfly:v2", "FLY_PRIVATE_IP": "fdaa:0:1::3", "FLY_DNS_SERVER": "127.0.0.1:5353"}
	e := Read(func(k string) string { return env[k] })
	if !e.OnFly() || e.PublicHost() != "purrfly-relay-a.fly.dev" || e.MachineID != "148e21dad76789" || e.Region != "ams" ||
		e.ImageRef != "registry.fly.io/purrfly:v2" || e.DNSServer != "127.0.0.1:5353" {
		t.Errorf("on Fly: %+v", e)
	}
	if a, ok, err := e.PrivateAddr(); err != nil || !ok || a.String() != "fdaa:0:1::3" {
		t.Errorf("private address %v %v %v", a, ok, err)
	}
	off := Read(func(string) string { return "" })
	if off.OnFly() || off.PublicHost() != "" {
		t.Errorf("off Fly: %+v", off)
	}
	if _, ok, err := off.PrivateAddr(); ok || err != nil {
		t.Errorf("no private address: %v %v", ok, err)
	}
	bad := Environment{PrivateIP: "not-an-ip"}
	if _, _, err := bad.PrivateAddr(); err == nil {
		t.Error("a bad FLY_PRIVATE_IP was accepted")
	}
}

// Off Fly the name does not resolve: the caller is told, not handed "".
func TestGlobalServicesAddrOffFly(t *testing.T) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return nil, &net.DNSError{Err: "no resolver in this test", IsNotFound: true}
	}}
	if addr, err := GlobalServicesAddr(context.Background(), r); err == nil || addr != "" {
		t.Errorf("resolved %q off Fly (%v)", addr, err)
	}
}
