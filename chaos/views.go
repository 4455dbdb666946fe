package chaos

import (
	"context"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// viewEvery is how often every started relay machine's own view of its
// rooms (wire.PathRelayRooms) is read.
const viewEvery = time.Second

// views samples the relays' views of their rooms: the split-brain check
// (one name hosted on two machines in one sample) and, for the /join
// check, which names some live machine serves. mu guards served and
// hostedOn, replaced whole by each sample; the sampler goroutine owns the
// rest.
type views struct {
	f   *fleet
	led *ledger

	mu       sync.Mutex
	served   map[string]bool   // names some reachable relay machine lists (any phase)
	hostedOn map[string]string // name -> machine id whose host is attached there
	hostedN  map[string]int    // name -> machines whose host is attached there
	at       time.Time         // when served was sampled

	split map[string]bool // names already reported as split (sampler only)

	rivalMu sync.Mutex
	rivals  map[string]bool // names a partition_rival fault re-allocated on purpose (rival.go)
}

// expectSplit marks a name whose duplicate the soak creates on purpose:
// its split is counted, not a violation, until the rival fault checks it.
func (v *views) expectSplit(name string, on bool) {
	v.rivalMu.Lock()
	defer v.rivalMu.Unlock()
	if on {
		v.rivals[name] = true
	} else {
		delete(v.rivals, name)
	}
}

// hostedCount is how many machines the last sample after since shows
// name hosted on (-1: no such sample yet).
func (v *views) hostedCount(name string, since time.Time) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.at.Before(since) {
		return -1
	}
	return v.hostedN[name]
}

// hostedMachine is the machine the last sample shows name hosted on ("").
func (v *views) hostedMachine(name string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hostedOn[name]
}

func newViews(f *fleet, led *ledger) *views {
	return &views{f: f, led: led, served: map[string]bool{}, hostedOn: map[string]string{}, hostedN: map[string]int{},
		split: map[string]bool{}, rivals: map[string]bool{}}
}

// run samples until ctx ends.
func (v *views) run(ctx context.Context) {
	t := time.NewTicker(viewEvery)
	defer t.Stop()
	for {
		v.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (v *views) sample(ctx context.Context) {
	ms, err := v.f.started(ctx, v.f.relays...)
	if err != nil {
		return // the Machines API itself may be faulted: skip this sample
	}
	served := map[string]bool{}
	hosted := map[string][]string{}
	for _, m := range ms {
		var rr wire.RelayRooms
		if _, err := v.f.private(ctx, m, wire.PathRelayRooms, &rr); err != nil {
			continue // killed, restarting or stopping: it serves nothing
		}
		for _, r := range rr.Rooms {
			served[r.Name] = true
			if r.Hosted {
				hosted[r.Name] = append(hosted[r.Name], m.ID)
			}
		}
	}
	on, count := map[string]string{}, map[string]int{}
	v.rivalMu.Lock()
	rivals := maps.Clone(v.rivals)
	v.rivalMu.Unlock()
	for name, ids := range hosted {
		on[name], count[name] = ids[0], len(ids)
		if len(ids) > 1 && rivals[name] {
			v.led.add("rival_split_samples", 1)
			continue
		}
		if len(ids) > 1 && !v.split[name] {
			v.split[name] = true
			sort.Strings(ids)
			v.led.violate(InvSplitBrain, name, "hosted on machines %s at once", strings.Join(ids, ", "))
		}
	}
	v.mu.Lock()
	v.served, v.hostedOn, v.hostedN, v.at = served, on, count, time.Now()
	v.mu.Unlock()
}

// isServed reports whether the last sample, taken after since, shows name
// on a live machine; ok is false when no sample since then exists yet.
func (v *views) isServed(name string, since time.Time) (served, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.at.Before(since) {
		return false, false
	}
	return v.served[name], true
}

// hostedOnce reports whether the last sample after since shows name hosted
// on exactly one machine.
func (v *views) hostedOnce(name string, since time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.at.Before(since) && v.hostedOn[name] != ""
}
