package balancer

import "github.com/purrfly/purrfly/wire"

// bounds is the balancer's state against its bounds (GET /v1/stats).
func (st *state) bounds() wire.Bounds {
	ts := st.tombs.stats(st.clock.Now())
	g, src := st.mem, st.rooms.sources
	refusing := g.full()
	return wire.Bounds{
		Memory: wire.MemoryBounds{Budget: g.budget, BudgetFrom: g.from, RefuseAt: g.refuseAt, Heap: g.heap.Load(),
			Refusing: refusing, Refused: g.refused.Load()},
		Tombstones: wire.TombstoneBounds{Held: ts.entries, Max: ts.max, RetentionSeconds: st.opts.TombstoneRetention.Seconds(),
			HorizonSeconds: ts.horizon.Seconds(), Evicted: ts.evicted},
		Pending:  wire.PendingBounds{Held: st.rooms.pendings.Load(), Max: maxPendingAllocations, Dropped: st.rooms.pendingDropped.Load()},
		Sources:  wire.SourceBounds{Max: src.max, Sources: src.sources.Load(), AtMax: src.atCap.Load(), Refused: src.refused.Load()},
		Unhosted: st.reg.unhostedTotal(),
	}
}
