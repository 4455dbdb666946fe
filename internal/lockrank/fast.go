package lockrank

import (
	"sync"
	"unsafe"
)

// The fast paths. With the checker off, a lock must cost what sync's does
// and one predictable branch. A wrapper that calls sync's Lock and Unlock
// cannot be inlined (sync's Unlock alone uses 76 of the compiler's inlining
// budget of 80), which would add a call to every lock of the hot paths. So
// Mutex.Lock and Unlock, and RWMutex.RLock and RUnlock, do sync's own fast
// path themselves, on sync's state word, and leave everything else to
// sync (a contended lock, a waiting writer, the race detector):
//
//   - Mutex: sync's Lock takes an unlocked mutex by swapping its state from
//     0 to mutexLocked; its Unlock of a mutex nobody waits for takes the
//     state from mutexLocked back to 0. Lock and Unlock here make the same
//     swaps, and call sync when they fail. TryLock calls sync's (taken
//     before a system call: a direct write, a socket's flush).
//   - RWMutex: sync's RLock adds one to the reader count (negative while a
//     writer holds or waits); its RUnlock takes one away. RLock here swaps
//     the count from 0 to 1 (the first reader, no writer), RUnlock from 1
//     to 0 (the last reader, no writer waiting), and they call sync for
//     any other count. A write lock always goes through sync (taken when a
//     room or a peer is added or removed, not per message).
//
// What is left to sync costs one call more than sync's own.
//
// This relies on sync's layout as of Go 1.26 (sync.Mutex is internal/sync's
// {state int32; sema uint32}; sync.RWMutex is {w Mutex; writerSem,
// readerSem uint32; readerCount, readerWait int32}). TestSyncLayout locks
// and unlocks through both sync and these paths and fails if a Go release
// changes either; TestFastPathsExclude hammers them against sync's.

// mutexLocked is sync.Mutex's locked bit.
const mutexLocked = 1

// rwLayout mirrors sync.RWMutex (w, writerSem, readerSem, readerCount,
// readerWait), for the reader count's offset.
type rwLayout struct {
	_           sync.Mutex
	_, _        uint32
	readerCount int32
	_           int32
}

// state is m's sync.Mutex state word.
func (m *Mutex) state() *int32 { return (*int32)(unsafe.Pointer(&m.mu)) }

// readers is m's sync.RWMutex reader count.
func (m *RWMutex) readers() *int32 {
	return (*int32)(unsafe.Add(unsafe.Pointer(&m.mu), unsafe.Offsetof(rwLayout{}.readerCount)))
}
