package e2e

import (
	"testing"

	"github.com/purrfly/purrfly/client"
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
	c, cl := crashAndClaim(t, api, room, allocID)
	defer cl.CloseNow()
	again, err := api.Allocate(tctx(t), "", room, allocID)
	if err == nil && again.Secret == c.Secret {
		t.Fatal("the allocation replay answered the promoted host's credential (generation 1)")
	}
}
