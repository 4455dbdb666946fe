package lockrank

import (
	"os"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	EnableForTests()
	os.Exit(m.Run())
}

// touched is written inside critical sections that hold nothing else.
var touched int

// mustPanic runs f and returns the message it panicked with, failing the
// test if it did not.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		msg, _ = r.(string)
	}()
	f()
	return ""
}

// TestInversionFires takes a room's lock and then the room table's, the
// wrong way round on purpose: the checker stops it before the second lock
// is taken and names both.
func TestInversionFires(t *testing.T) {
	if !Enabled() {
		t.Skip("the checker is off (benchmarks)")
	}
	room, shard := &Mutex{Class: Room}, &RWMutex{Class: RoomTable}
	room.Lock()
	msg := mustPanic(t, func() { shard.RLock() })
	room.Unlock()
	if !strings.Contains(msg, RoomTable.String()) || !strings.Contains(msg, Room.String()) {
		t.Fatalf("panic %q does not name both locks", msg)
	}
	// The refused lock was never taken: both are free, and the right
	// order passes.
	shard.Lock()
	room.Lock()
	touched++
	room.Unlock()
	shard.Unlock()
}

// TestLeavesDoNotNest: no ranked lock is taken under a leaf, not even
// another leaf.
func TestLeavesDoNotNest(t *testing.T) {
	if !Enabled() {
		t.Skip("the checker is off (benchmarks)")
	}
	conn, reg := &Mutex{Class: Conn}, &Mutex{Class: Registrar}
	conn.Lock()
	mustPanic(t, func() { reg.Lock() })
	conn.Unlock()
	// The same class twice (two rooms at once) is refused too.
	a, b := &Mutex{Class: Room}, &Mutex{Class: Room}
	a.Lock()
	mustPanic(t, func() { b.Lock() })
	a.Unlock()
}

// TestTryLockIsNotOrdered: a TryLock cannot wait, so it may take a lock
// against the order; the lock is then held like any other.
func TestTryLockIsNotOrdered(t *testing.T) {
	if !Enabled() {
		t.Skip("the checker is off (benchmarks)")
	}
	sock, room := &Mutex{Class: FrameSocket}, &Mutex{Class: Room}
	sock.Lock()
	if !room.TryLock() {
		t.Fatal("TryLock of a free lock failed")
	}
	room.Unlock()
	sock.Unlock()
	room.Lock()
	sock.Lock() // the order: a leaf under a room
	touched++
	sock.Unlock()
	room.Unlock()
}

// TestHandOff: a lock handed off by one goroutine is adopted by another,
// which unlocks it; a goroutine that unlocks a lock it was never handed
// is stopped.
func TestHandOff(t *testing.T) {
	if !Enabled() {
		t.Skip("the checker is off (benchmarks)")
	}
	m := &Mutex{Class: FrameSocket}
	m.Lock()
	m.HandOff()
	var wg sync.WaitGroup
	wg.Go(func() {
		m.Adopt()
		m.Unlock()
	})
	wg.Wait()
	m.Lock()
	var msg string
	wg.Go(func() {
		defer func() { msg, _ = recover().(string) }()
		m.Unlock()
	})
	wg.Wait()
	if !strings.Contains(msg, "does not hold it") {
		t.Fatalf("an unlock without the lock: %q", msg)
	}
	m.Unlock()
}

// TestUnclassedLockIsRefused: a mutex whose class was never set cannot be
// taken with the checker on.
func TestUnclassedLockIsRefused(t *testing.T) {
	if !Enabled() {
		t.Skip("the checker is off (benchmarks)")
	}
	var m Mutex
	mustPanic(t, func() { m.Lock() })
}

// TestEveryClassIsInTheTable: each class has a name and a rank, and the
// ranks never decrease in the order the classes are declared.
func TestEveryClassIsInTheTable(t *testing.T) {
	prev := uint8(0)
	for c := Class(1); c < numClasses; c++ {
		if classes[c].name == "" || classes[c].rank == 0 {
			t.Fatalf("class %d has no name or rank", c)
		}
		if classes[c].rank < prev {
			t.Fatalf("%s ranks below the class declared before it", c)
		}
		prev = classes[c].rank
	}
}

// TestCheckerAllocatesNothing: with the checker on, taking and releasing
// ranked locks allocates nothing (the zero-allocation tests of the relay
// and litenet run with it on).
func TestCheckerAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	shard, room, conn := &RWMutex{Class: RoomTable}, &Mutex{Class: Room}, &Mutex{Class: Conn}
	if n := testing.AllocsPerRun(1000, func() {
		shard.RLock()
		room.Lock()
		conn.Lock()
		touched++
		conn.Unlock()
		room.Unlock()
		shard.RUnlock()
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// BenchmarkLock is an uncontended lock and unlock: with the checker off
// (go test -bench) it costs what a sync.Mutex does.
func BenchmarkLock(b *testing.B) {
	m := &Mutex{Class: Room}
	for b.Loop() {
		m.Lock()
		touched++
		m.Unlock()
	}
}

// BenchmarkSyncMutex is BenchmarkLock's sync.Mutex: the difference is
// what a ranked lock costs with the checker off.
func BenchmarkSyncMutex(b *testing.B) {
	var m sync.Mutex
	for b.Loop() {
		m.Lock()
		touched++
		m.Unlock()
	}
}
