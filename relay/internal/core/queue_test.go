package core

import (
	"testing"
	"time"

	"github.com/purrfly/purrfly/relay/internal/buf"
)

// TestQueueBoundsCountBufferCapacity: a queued frame pins its whole pooled
// buffer, so the queue's byte bounds count buffer capacity, not frame
// length. A 16,385-byte SEND_ONE payload sits in a 65,542-byte buffer: a
// receiver that reads nothing passes the soft bound (1 MiB) at the 16th
// such frame and reaches the hard bound (8 MiB) at the 128th, not at the
// 64th and 512th that frame lengths would say.
func TestQueueBoundsCountBufferCapacity(t *testing.T) {
	cr := newCoreRoom(t)
	cr.core.slowTimeout = time.Hour // only the hard bound may close it
	payload := string(make([]byte, 16<<10+1))
	capacity := buf.MaxSize
	above := func() bool {
		cr.client.mu.Lock()
		defer cr.client.mu.Unlock()
		return !cr.client.fullSince.IsZero()
	}
	sent := 0
	for cr.client.CloseReason() == ReasonNone {
		if sent == 600 {
			t.Fatalf("a receiver holding %d frames of %d-byte buffers was never closed", sent, capacity)
		}
		cr.deliver(cr.host, sendOne(cr.client.id, payload))
		sent++
		if want := sent*capacity > softQueueBytes; above() != want {
			t.Fatalf("after %d frames (%d bytes of buffers): above the soft bound = %v, want %v",
				sent, sent*capacity, above(), want)
		}
	}
	if got, want := cr.client.CloseReason(), ReasonQueueOverflow; got != want {
		t.Fatalf("closed for %v, want %v", got, want)
	}
	if want := hardQueueBytes/capacity + 1; sent != want {
		t.Fatalf("closed at frame %d, want %d (the hard bound counted by buffer capacity)", sent, want)
	}
	cr.client.ReleaseQueue()
}
