package lockrank

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// enabled turns the checker on: set by Enable before any lock is taken,
// read on every lock and unlock (a predictable branch while it is off).
var enabled bool

// Enable turns the checker on for the whole process. Call it before any
// ranked lock is taken and never concurrently with one: from a test
// binary's TestMain (EnableForTests), never in production.
func Enable() { enabled = true }

// Enabled reports whether the checker is on.
func Enabled() bool { return enabled }

// Mutex is a sync.Mutex of a Class. Its zero value is an unlocked mutex
// without a class, which the checker refuses: set Class where the mutex
// is created, in its struct's composite literal or before first use.
type Mutex struct {
	mu    sync.Mutex
	Class Class
}

// Lock locks m; with the checker on it first checks m's rank against the
// locks this goroutine holds. With it off, an unlocked m is taken by
// sync's own fast path, inlined here (fast.go).
func (m *Mutex) Lock() {
	if !enabled && !raceEnabled && atomic.CompareAndSwapInt32(m.state(), 0, mutexLocked) {
		return
	}
	m.lock()
}

// lock is Lock through sync, checked when the checker is on.
func (m *Mutex) lock() {
	if enabled {
		acquire(m.Class, unsafe.Pointer(m), true)
	}
	m.mu.Lock()
}

// TryLock tries to lock m without waiting. A lock taken this way is held
// like any other, but taking it can never wait, so its rank is not
// checked against the locks already held.
func (m *Mutex) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	if enabled {
		acquire(m.Class, unsafe.Pointer(m), false)
	}
	return true
}

// Unlock unlocks m, which this goroutine must hold (locked, or adopted
// after a hand-off). With the checker off, an m nobody waits for is
// released by sync's own fast path, inlined here (fast.go).
func (m *Mutex) Unlock() {
	if !enabled && !raceEnabled && atomic.CompareAndSwapInt32(m.state(), mutexLocked, 0) {
		return
	}
	m.unlock()
}

// unlock is Unlock through sync, checked when the checker is on.
func (m *Mutex) unlock() {
	if enabled {
		release(m.Class, unsafe.Pointer(m))
	}
	m.mu.Unlock()
}

// HandOff gives up this goroutine's hold on m without unlocking it: m
// stays locked in transit until the goroutine it is handed to calls Adopt
// (and later Unlock). Without the checker it does nothing.
func (m *Mutex) HandOff() {
	if enabled {
		release(m.Class, unsafe.Pointer(m))
	}
}

// Adopt makes this goroutine the holder of m, which another goroutine
// locked and handed off (HandOff); its rank is checked as for Lock.
func (m *Mutex) Adopt() {
	if enabled {
		acquire(m.Class, unsafe.Pointer(m), true)
	}
}

// RWMutex is a sync.RWMutex of a Class. A read lock is ranked as a write
// lock: the order does not depend on the mode.
type RWMutex struct {
	mu    sync.RWMutex
	Class Class
}

// Lock locks m for writing.
func (m *RWMutex) Lock() {
	if enabled {
		acquire(m.Class, unsafe.Pointer(m), true)
	}
	m.mu.Lock()
}

// Unlock undoes Lock.
func (m *RWMutex) Unlock() {
	if enabled {
		release(m.Class, unsafe.Pointer(m))
	}
	m.mu.Unlock()
}

// RLock locks m for reading. With the checker off, the first reader of
// an m no writer holds or waits for is let in by sync's own fast path,
// inlined here (fast.go).
func (m *RWMutex) RLock() {
	if !enabled && !raceEnabled && atomic.CompareAndSwapInt32(m.readers(), 0, 1) {
		return
	}
	m.rlock()
}

// rlock is RLock through sync, checked when the checker is on.
func (m *RWMutex) rlock() {
	if enabled {
		acquire(m.Class, unsafe.Pointer(m), true)
	}
	m.mu.RLock()
}

// RUnlock undoes RLock. With the checker off, the last reader of an m no
// writer waits for leaves by sync's own fast path, inlined here (fast.go).
func (m *RWMutex) RUnlock() {
	if !enabled && !raceEnabled && atomic.CompareAndSwapInt32(m.readers(), 1, 0) {
		return
	}
	m.runlock()
}

// runlock is RUnlock through sync, checked when the checker is on.
func (m *RWMutex) runlock() {
	if enabled {
		release(m.Class, unsafe.Pointer(m))
	}
	m.mu.RUnlock()
}

// The held locks of each goroutine, in a fixed table (nothing is
// allocated once it runs, so the zero-allocation tests hold with the
// checker on): goroutines are spread over stripes, each under its own
// mutex (a plain one: the checker's own locks are not ranked).
const (
	stripes        = 128
	slotsPerStripe = 64
	maxHeld        = 8
)

type heldLock struct {
	class Class
	lock  unsafe.Pointer
}

// stripe holds the held locks of up to slotsPerStripe goroutines: slot i
// belongs to goroutine gids[i] (0: free) and holds n[i] locks, in the
// order taken.
type stripe struct {
	mu   sync.Mutex
	gids [slotsPerStripe]uintptr
	n    [slotsPerStripe]int
	held [slotsPerStripe][maxHeld]heldLock
}

var table [stripes]stripe

// stripeOf is the stripe of goroutine gid.
func stripeOf(gid uintptr) *stripe {
	h := uint64(gid) * 0x9e3779b97f4a7c15
	return &table[h>>57%stripes]
}

// acquire records that this goroutine takes lock l of class c, after
// checking (when check) that every lock it already holds ranks lower.
func acquire(c Class, l unsafe.Pointer, check bool) {
	if c == 0 || c >= numClasses {
		panic(fmt.Sprintf("lockrank: a lock without a class (%p) taken", l))
	}
	gid := goroutine()
	st := stripeOf(gid)
	st.mu.Lock()
	i := st.slot(gid, true)
	held := st.held[i][:st.n[i]]
	if check {
		for _, h := range held {
			if classes[h.class].rank >= classes[c].rank {
				st.mu.Unlock()
				panic(fmt.Sprintf("lockrank: lock order violated: taking %s (rank %d) while holding %s (rank %d)",
					c, classes[c].rank, h.class, classes[h.class].rank))
			}
		}
	}
	if len(held) == maxHeld {
		st.mu.Unlock()
		panic(fmt.Sprintf("lockrank: a goroutine holds more than %d ranked locks", maxHeld))
	}
	st.gids[i] = gid
	st.held[i][len(held)] = heldLock{class: c, lock: l}
	st.n[i]++
	st.mu.Unlock()
}

// release records that this goroutine no longer holds lock l.
func release(c Class, l unsafe.Pointer) {
	gid := goroutine()
	st := stripeOf(gid)
	st.mu.Lock()
	i, j := st.slot(gid, false), -1
	if i >= 0 {
		for k := st.n[i] - 1; k >= 0; k-- {
			if st.held[i][k].lock == l {
				j = k
				break
			}
		}
	}
	if j < 0 {
		st.mu.Unlock()
		panic(fmt.Sprintf("lockrank: %s released by a goroutine that does not hold it (a hand-off without HandOff and Adopt?)", c))
	}
	n := st.n[i]
	copy(st.held[i][j:n], st.held[i][j+1:n])
	st.held[i][n-1] = heldLock{}
	st.n[i]--
	if st.n[i] == 0 {
		st.gids[i] = 0
	}
	st.mu.Unlock()
}

// slot returns gid's slot, or (add) a free one for it, or -1; the caller
// holds st.mu.
func (st *stripe) slot(gid uintptr, add bool) int {
	free := -1
	for i, g := range st.gids {
		switch {
		case g == gid:
			return i
		case g == 0 && free < 0:
			free = i
		}
	}
	if add && free < 0 {
		panic(fmt.Sprintf("lockrank: more than %d goroutines of one stripe hold ranked locks", slotsPerStripe))
	}
	if !add {
		return -1
	}
	return free
}
