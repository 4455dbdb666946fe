package devstack_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStackOnAnotherAddress: `purrctl dev --host --secret --regions`: the
// stack binds and advertises the given address (a LAN address lets a
// phone play; here another loopback address), runs one relay per region
// with the given secret, and a smoke check passes over both transports in
// the last region.
func TestStackOnAnotherAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{Host: "127.0.0.3", Secret: "dev-s3cret", Regions: []string{"eu", "us", "asia"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if u, err := url.Parse(st.Balancer.URL()); err != nil || u.Hostname() != "127.0.0.3" {
		t.Fatalf("balancer URL %s, want it on 127.0.0.3", st.Balancer.URL())
	}
	b := client.NewBalancer(st.Balancer.URL())
	insts, err := b.Instances(ctx, "dev-s3cret")
	if err != nil || len(insts) != 3 {
		t.Fatalf("instances: %d, %v; want 3 relays", len(insts), err)
	}
	for _, in := range insts {
		if u, err := url.Parse(in.Endpoint); err != nil || u.Hostname() != "127.0.0.3" {
			t.Errorf("relay %s advertises %s, want 127.0.0.3", in.Region, in.Endpoint)
		}
	}
	if _, err := b.Instances(ctx, devstack.DefaultSecret); !errors.Is(err, wire.ErrUnauthorized) {
		t.Errorf("the default secret on a stack with its own: %v, want unauthorized", err)
	}
	for _, tr := range []client.Transport{client.TransportWebSocket, client.TransportUDP} {
		if _, err := client.Smoke(ctx, client.SmokeOptions{Balancer: st.Balancer.URL(), Region: "asia", StrictRegion: true, Transport: tr}); err != nil {
			t.Fatalf("smoke over %s: %v", tr, err)
		}
	}
}

// TestStackRefusesAWildcardHost: clients connect to what the stack
// advertises, so it must be one address.
func TestStackRefusesAWildcardHost(t *testing.T) {
	for _, h := range []string{"0.0.0.0", "::", "localhost"} {
		if st, err := devstack.Start(context.Background(), devstack.Options{Host: h}); err == nil {
			st.Close()
			t.Errorf("host %q accepted", h)
		}
	}
}
