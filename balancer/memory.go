package balancer

import (
	"bufio"
	"math"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The memory budget (package doc: Memory). The balancer's state grows with
// its rooms; every other table is bounded on its own (tombstones, pending
// allocations, event streams, pages). So the one thing to refuse when
// memory runs short is a new room: an allocation that would make one is
// answered 503 balancer_full while the live heap is past refuseAt.

// Shares of the budget the live heap may reach before new rooms are
// refused. With GOMEMLIMIT at or under the budget the collector keeps the
// whole heap within it, and the live heap may take most of it (the rest
// is what is allocated between two collections). Without it Go's
// collector lets the heap grow to twice the live heap (GOGC=100) before
// collecting, so the live heap may take under half.
const (
	memShareLimited   = 0.8
	memShareUnlimited = 0.4
)

// memReadEvery is how often the live heap is read at most: it changes
// only at a collection, and a read costs a microsecond or two.
const memReadEvery = 50 * time.Millisecond

// memGate answers whether the live heap leaves room for new rooms. Safe
// for concurrent use.
type memGate struct {
	budget   int64  // static: bytes; 0 = unknown (nothing is refused)
	from     string // static: where budget comes from
	refuseAt int64  // static: the live heap that refuses new rooms; 0 = never
	// readHeap is the live heap after the last collection (static;
	// runtime/metrics, or a test's); every is memReadEvery, or 0 for a
	// test's reader.
	readHeap func() int64
	every    time.Duration

	next    atomic.Int64 // wall clock (Unix ns): the next read
	heap    atomic.Int64 // the last read
	refused atomic.Uint64
}

// newMemGate finds the budget (Options.MemoryBudget, else GOMEMLIMIT,
// else the cgroup's memory limit, else the machine's memory) and the live
// heap at which to refuse new rooms.
func newMemGate(o Options) *memGate {
	g := &memGate{readHeap: liveHeapBytes, every: memReadEvery}
	if o.readHeap != nil {
		g.readHeap, g.every = o.readHeap, 0
	}
	goLimit := debug.SetMemoryLimit(-1)
	switch {
	case o.MemoryBudget > 0:
		g.budget, g.from = o.MemoryBudget, "option"
	case goLimit > 0 && goLimit < math.MaxInt64:
		g.budget, g.from = goLimit, "GOMEMLIMIT"
	default:
		if n := cgroupMemoryLimit(); n > 0 {
			g.budget, g.from = n, "cgroup"
		} else if n := machineMemory(); n > 0 {
			g.budget, g.from = n, "meminfo"
		}
	}
	share := memShareUnlimited
	if goLimit <= g.budget {
		share = memShareLimited
	}
	g.refuseAt = int64(float64(g.budget) * share)
	return g
}

// full reports whether new rooms must be refused now.
func (g *memGate) full() bool {
	if g.refuseAt <= 0 {
		return false
	}
	if g.every == 0 {
		g.heap.Store(g.readHeap())
	} else if now, next := time.Now().UnixNano(), g.next.Load(); now >= next && g.next.CompareAndSwap(next, now+int64(g.every)) { // wall clock: a read's pace, not the balancer's time
		g.heap.Store(g.readHeap())
	}
	return g.heap.Load() >= g.refuseAt
}

// liveHeapBytes is the heap the last collection found live.
func liveHeapBytes() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// cgroupMemoryLimit is the memory limit of this process's cgroup (v2, else
// v1), or 0 when it has none.
func cgroupMemoryLimit() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(f); err == nil {
			return parseCgroupLimit(string(b))
		}
	}
	return 0
}

// parseCgroupLimit reads a cgroup memory limit file: bytes, or "max" (v2)
// or a number near 2^63 (v1) for none (0).
func parseCgroupLimit(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0
	}
	return n
}

// machineMemory is MemTotal of /proc/meminfo (a Fly machine's VM), or 0.
func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
