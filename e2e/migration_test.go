package e2e

import (
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// Host migration end to end through the balancer and a real relay, over
// WebSocket and over UDP: a graceful handoff (grant, claim, fencing,
// provisional host and its listen-client, an isolated client closed at
// activation, activation, rejoin), then a crash recovered with the client
// credential alone (client.SmokeMigration, what `purrctl smoke
// --migration` runs).
func TestMigrationSmoke(t *testing.T) {
	s := startDev(t, nil)
	for _, tr := range []client.Transport{client.TransportWebSocket, client.TransportUDP} {
		t.Run(tr.String(), func(t *testing.T) {
			rep, err := client.SmokeMigration(t.Context(), client.SmokeOptions{
				Balancer: s.bal.URL(), Transport: tr, Timeout: stepTimeout, Logf: t.Logf})
			if err != nil {
				t.Fatalf("%v (steps passed: %v)", err, rep.Steps)
			}
		})
	}
}

// claimLease crashes the host of a fresh room and claims it, and returns
// the activation lease the claim got.
func claimLease(t *testing.T, api *client.Balancer) time.Duration {
	t.Helper()
	c, cl := crashAndClaim(t, api, "lease-"+client.NewClaimID()[:8], client.NewAllocationID())
	defer cl.CloseNow()
	claimed, _ := time.Parse(time.RFC3339Nano, c.ClaimedAt)
	until, _ := time.Parse(time.RFC3339Nano, c.ActivationExpiresAt)
	return until.Sub(claimed)
}

// crashAndClaim allocates room as allocID, connects its host and one
// client, crashes the host and, once the room is vacant, claims it with a
// joiner's credential, promoting player 1. It returns the claim and the
// client, still in the room (the caller closes it; the test's end does if
// the caller never gets it).
func crashAndClaim(t *testing.T, api *client.Balancer, room, allocID string) (wire.MigrationClaim, *client.Client) {
	t.Helper()
	hc, err := api.Allocate(tctx(t), "", room, allocID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := client.DialHost(tctx(t), hc, room, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := joinClient(t, api, room)
	expectConnected(t, h)
	h.CloseNow()
	jc, err := api.Join(tctx(t), room)
	if err != nil {
		t.Fatal(err)
	}
	var st wire.MigrationState
	testutil.Eventually(t, 5*time.Second, "the room vacant", func() bool {
		st, err = api.MigrationCurrent(tctx(t), room, jc.Secret)
		return err == nil && st.HostPhase == wire.HostPhaseVacant
	})
	c, err := api.Claim(tctx(t), wire.MigrationRequest{Name: room, Secret: jc.Secret, ClaimID: client.NewClaimID(),
		Incarnation: st.Incarnation, ExpectedGeneration: st.Generation, PromotedPlayerID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}
