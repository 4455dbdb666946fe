package e2e

import (
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// An allocation's exact replay after a migration answers the
// allocation's own (spent) host credential, never the promoted host's: the
// original allocator, now only a session member, cannot take the host
// over with it.
func TestMigrationAllocateReplayAfterClaimKeepsItsOwnCredential(t *testing.T) {
	s := startDev(t, nil)
	api := newAPI(t, s.bal.URL())
	room := "leak-" + client.NewClaimID()[:8]
	allocID := client.NewAllocationID()
	hc, err := api.Allocate(tctx(t), "", room, allocID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := client.DialHost(tctx(t), hc, room, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := joinClient(t, api, room)
	defer cl.CloseNow()
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
	again, err := api.Allocate(tctx(t), "", room, allocID)
	if err == nil && again.Secret == c.Secret {
		t.Fatal("the allocation replay answered the promoted host's credential (generation 1)")
	}
}
