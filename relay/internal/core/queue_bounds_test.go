package core

import (
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
)

// Each test here pins one edge of a connection's queue bounds (queue.go):
// the bounds are inclusive (a queue may hold exactly hardQueueFrames
// frames or hardQueueBytes of buffers), the slow-receiver clock starts
// only above the soft bound, closes at exactly the slow timeout, and stops
// once the writer has brought the queue back to the soft bound.

// Payloads whose frames land in the smallest buffer class (512 bytes) and
// in the 16,384-byte class.
var (
	smallPayload = "x"
	midPayload   = strings.Repeat("m", 8000)
)

// newClockedCoreRoom is newCoreRoom on clk.
func newClockedCoreRoom(t *testing.T, clk clock.Clock) *coreRoom {
	t.Helper()
	return newCoreRoomIn(t, testCore(t, clk), "bounds")
}

// fill queues n frames of payload for the room's client (which never
// reads) and fails if that closes it.
func (cr *coreRoom) fill(t *testing.T, n int, payload string) {
	t.Helper()
	for i := range n {
		cr.deliver(cr.host, sendOne(cr.client.id, payload))
		if r := cr.client.CloseReason(); r != ReasonNone {
			t.Fatalf("closed (%v) at frame %d of %d", r, i+1, n)
		}
	}
}

func TestQueueHoldsExactlyItsHardFrameBound(t *testing.T) {
	cr := newCoreRoom(t)
	cr.core.slowTimeout = time.Hour // only the hard bound may close it
	if w := buf.Get(buf.Headroom + len(sendOne(0, smallPayload))).Weight(); w != 512 {
		t.Fatalf("a small frame weighs %d, want 512", w)
	}
	cr.fill(t, hardQueueFrames, smallPayload) // 4,096 frames, 2 MiB of buffers
	cr.deliver(cr.host, sendOne(cr.client.id, smallPayload))
	if got := cr.client.CloseReason(); got != ReasonQueueOverflow {
		t.Fatalf("frame %d past the bound: closed for %v, want %v", hardQueueFrames+1, got, ReasonQueueOverflow)
	}
	cr.client.ReleaseQueue()
}

func TestQueueHoldsExactlyItsHardByteBound(t *testing.T) {
	cr := newCoreRoom(t)
	cr.core.slowTimeout = time.Hour
	w := buf.Get(buf.Headroom + len(sendOne(0, midPayload))).Weight()
	if hardQueueBytes%w != 0 {
		t.Fatalf("a %d-byte buffer does not divide the hard bound", w)
	}
	cr.fill(t, hardQueueBytes/w, midPayload) // 512 frames: exactly 8 MiB of buffers
	cr.deliver(cr.host, sendOne(cr.client.id, midPayload))
	if got := cr.client.CloseReason(); got != ReasonQueueOverflow {
		t.Fatalf("one buffer past 8 MiB: closed for %v, want %v", got, ReasonQueueOverflow)
	}
	cr.client.ReleaseQueue()
}

// softBounds are the soft queue bound in frames and in bytes: a payload
// and how many of its frames fill the queue exactly to the bound.
var softBounds = []struct {
	name    string
	payload string
	atBound int
}{
	{"frames", smallPayload, softQueueFrames},
	{"bytes", midPayload, softQueueBytes / 16384},
}

// TestSlowClockStartsAboveTheSoftBound: a queue at exactly the soft bound
// (512 frames, or 1 MiB of buffers) is not behind; the clock starts at the
// next frame, and the receiver is closed once it has been above the bound
// for exactly the slow timeout.
func TestSlowClockStartsAboveTheSoftBound(t *testing.T) {
	for _, tc := range softBounds {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_800_000_000, 0))
			cr := newClockedCoreRoom(t, clk)
			cr.fill(t, tc.atBound, tc.payload)
			clk.Advance(cr.core.slowTimeout)
			cr.fill(t, 1, tc.payload) // above the bound: the clock starts now
			clk.Advance(cr.core.slowTimeout - time.Nanosecond)
			cr.fill(t, 1, tc.payload)
			clk.Advance(time.Nanosecond)
			cr.deliver(cr.host, sendOne(cr.client.id, tc.payload))
			if got := cr.client.CloseReason(); got != ReasonSlowReceiver {
				t.Fatalf("above the soft bound for the slow timeout: closed for %v, want %v", got, ReasonSlowReceiver)
			}
			cr.client.ReleaseQueue()
		})
	}
}

// TestSlowClockStopsAtTheSoftBound: a writer that brings the queue back to
// exactly the soft bound has caught up; a later backlog gets the whole
// slow timeout again.
func TestSlowClockStopsAtTheSoftBound(t *testing.T) {
	for _, tc := range softBounds {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_800_000_000, 0))
			cr := newClockedCoreRoom(t, clk)
			cr.fill(t, tc.atBound+MaxBatch, tc.payload) // above the bound from frame atBound+1
			clk.Advance(cr.core.slowTimeout / 2)
			if n := cr.drain(cr.client); n != MaxBatch {
				t.Fatalf("the writer took %d frames, want %d", n, MaxBatch)
			}
			// Back at the bound: caught up. Above it again a full timeout
			// after the first backlog began, the receiver is not yet slow.
			clk.Advance(cr.core.slowTimeout)
			cr.fill(t, 1, tc.payload)
			clk.Advance(cr.core.slowTimeout - time.Nanosecond)
			cr.fill(t, 1, tc.payload)
			cr.client.ReleaseQueue()
		})
	}
}

// TestIdleQueueKeepsOnlyASmallSlice: a queue drained empty keeps its
// slice up to shrinkCap entries (steady traffic appends without
// allocating) and lets a burst's larger one go (an idle connection pins
// no burst-sized slice); queued reports what is waiting, which a UDP
// peer's flush returns as "more" (true on an empty queue would wake the
// peer's flush forever).
func TestIdleQueueKeepsOnlyASmallSlice(t *testing.T) {
	cr := newCoreRoom(t)
	if cr.client.Queued() {
		t.Fatal("a fresh connection reports frames waiting")
	}
	drainAll := func() {
		for cr.drain(cr.client) > 0 {
		}
	}
	cr.client.q = make([]*buf.Buf, 0, ShrinkCap) // a slice exactly at the cap
	cr.fill(t, ShrinkCap, smallPayload)
	if !cr.client.Queued() {
		t.Fatal("a queue of frames reports nothing waiting")
	}
	if c := cap(cr.client.q); c != ShrinkCap {
		t.Fatalf("a queue of %d frames grew to capacity %d", ShrinkCap, c)
	}
	drainAll()
	if cr.client.Queued() {
		t.Fatal("a drained queue reports frames waiting")
	}
	if c := cap(cr.client.q); c != ShrinkCap {
		t.Fatalf("a drained queue of capacity %d kept %d, want it kept", ShrinkCap, c)
	}
	cr.fill(t, ShrinkCap+1, smallPayload)
	drainAll()
	if cr.client.q != nil {
		t.Fatalf("a drained burst kept a slice of capacity %d", cap(cr.client.q))
	}
}
