package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/balancer"
	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/relay"
	"github.com/purrfly/purrfly/wire"
)

// TestPlacementWithRealRelays: real relays register their labels and
// capacity; a labelled placement (the Go API a matchmaker route calls,
// and ?labels= on /allocate_ws) lands on a relay carrying them, in the
// requested region first, skips one at its room capacity, and the host
// and a client of the placed room meet there. Nothing fitting is 409
// no_candidate saying why; PurrNet's allocations are unchanged.
func TestPlacementWithRealRelays(t *testing.T) {
	b := newBalancer(t, 0, nil)
	api := newAPI(t, b.URL())
	pro := newRelay(t, b.URL(), "eu", func(o *relay.Options) {
		o.Labels = map[string]string{"tier": "pro"}
		o.Capacity = wire.Capacity{MaxRooms: 1}
	})
	free := newRelay(t, b.URL(), "eu", func(o *relay.Options) { o.Labels = map[string]string{"tier": "free"} })
	proUS := newRelay(t, b.URL(), "us", func(o *relay.Options) { o.Labels = map[string]string{"tier": "pro"} })
	waitRegistered(t, api, pro.BootID(), free.BootID(), proUS.BootID())
	port := func(r *relay.Server) int { return portOf(t, r.WSURL()) }

	proEU := balancer.Placement{Region: "eu", Labels: map[string]string{"tier": "pro"}}
	c, err := b.Allocate(tctx(t), "pro-1", client.NewAllocationID(), proEU)
	if err != nil || c.Port != port(pro) {
		t.Fatalf("tier=pro in eu: port %d, %v; want the eu pro relay (%d)", c.Port, err, port(pro))
	}
	host, err := client.DialHost(tctx(t), c, "pro-1", nil)
	if err != nil {
		t.Fatalf("host of pro-1: %v", err)
	}
	t.Cleanup(func() { _ = host.CloseNow() })
	cl := joinClient(t, api, "pro-1")
	ids := expectConnected(t, host)
	roundTrip(t, host, cl, ids[0], "pro")

	// The eu pro relay holds its one room: the next pro room goes to the
	// us one rather than to a relay without the label.
	c, err = b.Allocate(tctx(t), "pro-2", client.NewAllocationID(), proEU)
	if err != nil || c.Port != port(proUS) {
		t.Fatalf("eu pro relay full: port %d, %v; want the us pro relay (%d)", c.Port, err, port(proUS))
	}
	// The same through /allocate_ws?labels=, a caller other than PurrNet.
	a := do(t, http.MethodPost, b.URL()+"/allocate_ws?labels=tier:free", map[string]string{
		"region": "us", "name": "free-1", "allocation_id": client.NewAllocationID()}, nil)
	var fc wire.Capability
	if a.status != http.StatusOK || json.Unmarshal(a.body, &fc) != nil || fc.Port != port(free) {
		t.Fatalf("?labels=tier:free from us: %d %s; want the eu free relay (%d)", a.status, a.body, port(free))
	}

	a = do(t, http.MethodPost, b.URL()+"/allocate_ws?labels=gpu:yes", map[string]string{
		"region": "eu", "name": "gpu-1", "allocation_id": client.NewAllocationID()}, nil)
	if e := a.wireErr(t); a.status != http.StatusConflict || e.Code != "no_candidate" || !e.Retryable ||
		e.Message != "3 relays: 3 without the labels; labels asked: gpu:yes" {
		t.Fatalf("?labels=gpu:yes: %d %s", a.status, a.body)
	}
	// PurrNet asks for no label: any relay that is not full.
	c, err = api.Allocate(tctx(t), "eu", "purrnet-1", client.NewAllocationID())
	if err != nil || c.Port == port(pro) {
		t.Fatalf("PurrNet's allocation: port %d, %v; not the full pro relay", c.Port, err)
	}
}

// TestPlacementRelayEnforcesConnections: a real relay at its connection
// capacity takes no new room, whether the balancer already counted the
// connection (full) or the relay refused it (relay_full): PurrNet's
// allocation is 503 no_relays that says full, and the room's players
// still join it.
func TestPlacementRelayEnforcesConnections(t *testing.T) {
	b := newBalancer(t, 0, nil)
	api := newAPI(t, b.URL())
	r := newRelay(t, b.URL(), "eu", func(o *relay.Options) { o.Capacity = wire.Capacity{MaxConnections: 1} })
	waitRegistered(t, api, r.BootID())
	o := allocHost(t, api, "eu", "only")
	testutil.Eventually(t, stepTimeout, "the host connected", func() bool { return r.Stats().Connections == 1 })

	_, err := api.Allocate(tctx(t), "eu", "second", client.NewAllocationID())
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != "no_relays" || we.Status != http.StatusServiceUnavailable || !we.Retryable ||
		!strings.Contains(we.Message, "full") {
		t.Fatalf("a second room at 1/1 connections: %v, want 503 no_relays saying full", err)
	}
	cl := joinClient(t, api, "only")
	ids := expectConnected(t, o.host)
	roundTrip(t, o.host, cl, ids[0], "over-capacity")
}
