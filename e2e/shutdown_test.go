package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// shutdownAsync runs r.Shutdown in the background and returns its result
// channel and the time it started.
func shutdownAsync(t testing.TB, r *relay.Server) (<-chan error, time.Time) {
	done := make(chan error, 1)
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- r.Shutdown(ctx)
	}()
	t.Cleanup(func() { <-finished }) // never leave it running past the test
	return done, start
}

func waitDraining(t testing.TB, api *client.Balancer, r *relay.Server) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "the relay to report draining", func() bool {
		p, _, err := api.Ping(tctx(t), r.HTTPURL())
		return err == nil && p.Draining
	})
	testutil.Eventually(t, 5*time.Second, "the balancer to mark the relay draining", func() bool {
		ins, err := api.Instances(tctx(t), testSecret)
		if err != nil {
			return false
		}
		for _, in := range ins {
			if in.BootID == r.BootID() {
				return in.Status == wire.InstanceDraining
			}
		}
		return false
	})
}

// TestRelayShutdownDrains: relay.Shutdown stops taking rooms (the relay
// answers 503 draining, the balancer places elsewhere) while its rooms keep
// working; at the drain deadline every socket is closed with 1012, the
// remaining rooms leave the balancer, and Shutdown returns.
func TestRelayShutdownDrains(t *testing.T) {
	const drain = 1500 * time.Millisecond
	b := newBalancer(t, 0, nil)
	api := newAPI(t, b.URL())
	eu := newRelay(t, b.URL(), "eu", func(o *relay.Options) { o.DrainTimeout = drain })
	us := newRelay(t, b.URL(), "us", nil)
	waitRegistered(t, api, eu.BootID(), us.BootID())
	p := newPair(t, api, "eu", "drained")

	done, start := shutdownAsync(t, eu)
	waitDraining(t, api, eu)

	a := do(t, http.MethodPost, eu.HTTPURL()+wire.PathRelayAllocate, map[string]string{
		wire.HeaderInternalSecret: testSecret, "name": "on-draining", "region": "eu", "allocation_id": client.NewAllocationID(),
	}, nil)
	if e := a.wireErr(t); a.status != http.StatusServiceUnavailable || e.Code != "draining" || !e.Retryable {
		t.Fatalf("allocation on a draining relay: %d %s, want 503 draining (retryable)", a.status, a.body)
	}
	c, err := api.Allocate(tctx(t), "eu", "placed-elsewhere", client.NewAllocationID())
	if err != nil {
		t.Fatalf("allocate while eu drains: %v", err)
	}
	if c.Port != portOf(t, us.WSURL()) {
		t.Fatalf("room placed on port %d while eu drains, want us (%d)", c.Port, portOf(t, us.WSURL()))
	}
	roundTrip(t, p.host, p.cl, p.id, "during-drain")

	if st := expectClosed(t, clientRead(p.cl)); st != client.StatusServiceRestart {
		t.Fatalf("client closed with %d at the drain deadline, want 1012", st)
	}
	if st := expectClosed(t, hostRead(p.host)); st != client.StatusServiceRestart {
		t.Fatalf("host closed with %d at the drain deadline, want 1012", st)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(drain + 5*time.Second):
		t.Fatal("Shutdown hangs past its drain deadline")
	}
	if el := time.Since(start); el < drain {
		t.Fatalf("Shutdown returned after %v with a connection open, before the %v drain deadline", el, drain)
	}
	testutil.Eventually(t, 2*time.Second, "the drained room to leave the balancer", func() bool { return notFound(t, api, "drained") })
	if _, err := client.DialClient(tctx(t), c, "placed-elsewhere", &client.DialOptions{URL: eu.WSURL()}); err == nil {
		t.Fatal("a drained relay still accepts connections")
	}
}

// TestRelayShutdownEndsEarlyWhenEmpty: a drain ends as soon as the last
// connection leaves, long before the deadline.
func TestRelayShutdownEndsEarlyWhenEmpty(t *testing.T) {
	b := newBalancer(t, 0, nil)
	api := newAPI(t, b.URL())
	r := newRelay(t, b.URL(), "eu", func(o *relay.Options) { o.DrainTimeout = 20 * time.Second })
	waitRegistered(t, api, r.BootID())
	p := newPair(t, api, "eu", "leaving")
	done, start := shutdownAsync(t, r)
	waitDraining(t, api, r)

	// The only relay drains: the balancer has nowhere to place a room.
	_, err := api.Allocate(tctx(t), "eu", "nowhere", client.NewAllocationID())
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != http.StatusServiceUnavailable || !we.Retryable || (we.Code != "draining" && we.Code != "no_relays") {
		t.Fatalf("allocate while the only relay drains: %v, want a retryable 503", err)
	}

	if err := p.cl.Close(); err != nil {
		t.Fatal(err)
	}
	expectDisconnected(t, p.host, p.id)
	if err := p.host.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not end when the last connection left")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Shutdown took %v after the relay emptied", el)
	}
}
