package lockrank

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// checkerOff turns the checker off for the rest of the test (the fast
// paths run only then), and back on after it. No ranked lock may be held
// across either.
func checkerOff(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("under the race detector every lock goes through sync")
	}
	was := enabled
	enabled = false
	t.Cleanup(func() { enabled = was })
}

// TestSyncLayout: the state words fast.go swaps are sync's. A Go release
// that changes sync.Mutex's or sync.RWMutex's layout or their fast paths'
// encoding fails here, before a fast path could take a lock sync does not
// see.
func TestSyncLayout(t *testing.T) {
	checkerOff(t)
	if unsafe.Sizeof(sync.Mutex{}) != 8 || unsafe.Sizeof(sync.RWMutex{}) != unsafe.Sizeof(rwLayout{}) {
		t.Fatalf("sync.Mutex is %d bytes, sync.RWMutex %d (rwLayout %d)",
			unsafe.Sizeof(sync.Mutex{}), unsafe.Sizeof(sync.RWMutex{}), unsafe.Sizeof(rwLayout{}))
	}
	var m Mutex
	m.mu.Lock()
	if got := atomic.LoadInt32(m.state()); got != mutexLocked {
		t.Fatalf("sync's locked Mutex has state %d, want %d", got, mutexLocked)
	}
	m.mu.Unlock()
	if got := atomic.LoadInt32(m.state()); got != 0 {
		t.Fatalf("sync's unlocked Mutex has state %d", got)
	}
	m.Lock()
	if m.mu.TryLock() {
		t.Fatal("sync took a Mutex the fast path holds")
	}
	m.Unlock()
	if !m.mu.TryLock() {
		t.Fatal("sync cannot take a Mutex the fast path released")
	}
	m.mu.Unlock()

	var rw RWMutex
	rw.mu.RLock()
	if got := atomic.LoadInt32(rw.readers()); got != 1 {
		t.Fatalf("sync's read-locked RWMutex counts %d readers", got)
	}
	rw.mu.RUnlock()
	rw.mu.Lock()
	if got := atomic.LoadInt32(rw.readers()); got >= 0 {
		t.Fatalf("sync's write-locked RWMutex counts %d readers, want a negative count", got)
	}
	rw.mu.Unlock()
	rw.RLock()
	if rw.mu.TryLock() {
		t.Fatal("a writer took an RWMutex the fast path holds for reading")
	}
	if !rw.mu.TryRLock() {
		t.Fatal("a second reader was refused")
	}
	rw.mu.RUnlock()
	rw.RUnlock()
	if !rw.mu.TryLock() {
		t.Fatal("a writer cannot take an RWMutex the fast path released")
	}
	rw.mu.Unlock()
}

// TestFastPathsExclude: goroutines taking the same locks, some through
// the fast paths and some through sync (contention sends the fast paths
// to sync too), never overlap: every increment made under a lock is
// counted, and a writer never sees a reader inside.
func TestFastPathsExclude(t *testing.T) {
	checkerOff(t)
	const workers, rounds = 8, 20000
	var m Mutex
	var rw RWMutex
	var n int
	var inside atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				if (w+i)%2 == 0 {
					m.Lock()
					n++
					m.Unlock()
				} else {
					m.mu.Lock()
					n++
					m.mu.Unlock()
				}
				switch {
				case i%16 == 0:
					rw.Lock()
					if r := inside.Load(); r != 0 {
						t.Errorf("a writer is in with %d readers", r)
					}
					rw.Unlock()
				case w%2 == 0:
					rw.RLock()
					inside.Add(1)
					inside.Add(-1)
					rw.RUnlock()
				default:
					rw.mu.RLock()
					inside.Add(1)
					inside.Add(-1)
					rw.mu.RUnlock()
				}
			}
		})
	}
	wg.Wait()
	if n != workers*rounds {
		t.Fatalf("%d increments counted, want %d", n, workers*rounds)
	}
}
