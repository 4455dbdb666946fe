package flyaffinity

import (
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// ownersOf maps n keys ("room-<i>") to their owners under set.
func ownersOf(set *peerSet, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = set.owner(keyHash(fmt.Sprintf("room-%d", i)))
	}
	return out
}

// Adding one machine to ten moves about 1/11 of the sessions, all of them to
// the new machine; modulo hashing moves most of them.
func TestAddingOneMachineMovesAboutOneEleventh(t *testing.T) {
	const keys = 100_000
	ids := machineIDs(11)
	ten := newPeerSet(ids[:10], "", "app", 8080)
	eleven := newPeerSet(ids, "", "app", 8080)
	before, after := ownersOf(ten, keys), ownersOf(eleven, keys)

	movedHRW, movedMod := 0, 0
	for i := range keys {
		if before[i] != after[i] {
			movedHRW++
			if after[i] != ids[10] {
				t.Fatalf("key %d moved from %s to %s, not to the new machine", i, before[i], after[i])
			}
		}
		h := xxhash.Sum64String(fmt.Sprintf("room-%d", i))
		if h%10 != h%11 {
			movedMod++
		}
	}
	hrwPct := 100 * float64(movedHRW) / keys
	modPct := 100 * float64(movedMod) / keys
	t.Logf("adding 1 machine to 10, %d keys: HRW moved %.2f%%, modulo moved %.2f%%", keys, hrwPct, modPct)
	if hrwPct < 7 || hrwPct > 11 {
		t.Errorf("HRW moved %.2f%% of keys, want between 7%% and 11%%", hrwPct)
	}
	if modPct < 50 {
		t.Errorf("modulo moved %.2f%% of keys, expected most of them", modPct)
	}
}

// Removing a machine moves exactly the sessions it owned.
func TestRemovingOneMachineMovesOnlyItsSessions(t *testing.T) {
	const keys = 20_000
	ids := machineIDs(8)
	full := newPeerSet(ids, "", "app", 8080)
	less := newPeerSet(append(append([]string{}, ids[:3]...), ids[4:]...), "", "app", 8080)
	before, after := ownersOf(full, keys), ownersOf(less, keys)
	for i := range keys {
		if (before[i] == ids[3]) != (before[i] != after[i]) {
			t.Fatalf("key %d: owner %s -> %s after removing %s", i, before[i], after[i], ids[3])
		}
	}
}

// Every machine owns a fair share.
func TestOwnershipIsBalanced(t *testing.T) {
	const keys = 50_000
	ids := machineIDs(16)
	set := newPeerSet(ids, "", "app", 8080)
	count := map[string]int{}
	for _, o := range ownersOf(set, keys) {
		count[o]++
	}
	want := keys / len(ids)
	for _, id := range ids {
		if c := count[id]; c < want*85/100 || c > want*115/100 {
			t.Errorf("machine %s owns %d keys, want about %d", id, c, want)
		}
	}
}

// The owner does not depend on the order DNS lists machines in, nor on
// duplicates.
func TestOwnerIgnoresListingOrder(t *testing.T) {
	ids := machineIDs(7)
	rev := make([]string, 0, len(ids)+2)
	for i := len(ids) - 1; i >= 0; i-- {
		rev = append(rev, ids[i])
	}
	rev = append(rev, ids[2], ids[5])
	a := ownersOf(newPeerSet(ids, "", "app", 8080), 5000)
	b := ownersOf(newPeerSet(rev, "", "app", 8080), 5000)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("key %d: owner %s in one order, %s in another", i, a[i], b[i])
		}
	}
}

// Equal weights go to the smaller machine id.
func TestTieGoesToSmallerID(t *testing.T) {
	set := &peerSet{ids: []string{"aaa", "bbb"}, hashes: []uint64{42, 42}}
	for k := range uint64(100) {
		if got := set.owner(k); got != "aaa" {
			t.Fatalf("tie for key hash %d went to %s, want aaa", k, got)
		}
	}
	if got := (&peerSet{}).owner(1); got != "" {
		t.Fatalf("empty set owner = %q, want empty", got)
	}
}

// The hash is fixed and seedless: these values must never change, or
// machines running different builds would disagree on owners.
func TestHashIsStable(t *testing.T) {
	if got, want := keyHash("room-1"), xxhash.Sum64String("room-1"); got != want {
		t.Fatalf("keyHash = %x, want xxhash %x", got, want)
	}
	set := newPeerSet([]string{"148e21dad76789", "4d89699c030518", "e784e7b3a21358"}, "", "app", 8080)
	golden := map[string]string{"room-1": "e784e7b3a21358", "lobby": "148e21dad76789", "x": "4d89699c030518"}
	for k, want := range golden {
		if got := set.owner(keyHash(k)); got != want {
			t.Errorf("owner of %q = %s, want %s (the hash or mix changed)", k, got, want)
		}
	}
	if mix(0) != 0 || mix(1) != 0x5692161d100b05e5 {
		t.Fatalf("mix is not splitmix64's finalizer: mix(1) = %#x", mix(1))
	}
}
