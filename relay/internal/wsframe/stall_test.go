package wsframe

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// testStall is the stall bound of these tests: a socket deadline, so on
// the wall clock, and short.
const testStall = 200 * time.Millisecond

// announce is the header of a masked final binary frame that says it
// carries n bytes (a 64-bit length), without them.
func announce(n uint64) []byte {
	h := binary.BigEndian.AppendUint64([]byte{0x80 | opBinary, 0x80 | 127}, n)
	return append(h, 1, 2, 3, 4)
}

// endWithin reads with r until it ends, and fails unless it ends with
// want within bound (before: with NextBefore's deadline at before, else
// with Next).
func endWithin(t *testing.T, r *Reader, want End, bound time.Duration, before time.Time) {
	t.Helper()
	start := time.Now() // wall clock: the bounds are socket deadlines
	var (
		b   *buf.Buf
		end End
	)
	if before.IsZero() {
		b, end, _ = r.Next()
	} else {
		b, end = r.NextBefore(before)
	}
	buf.Put(b)
	if took := time.Since(start); end != want || took > bound {
		t.Fatalf("ended %v after %v, want %v within %v", end, took, want, bound)
	}
}

// TestFrameReaderRefusesTooBigAtTheHeader: a frame announcing more than
// the limit gets its 1009 close at once, before any of its payload is
// there, whatever length it announces, while a deadline bounds the read
// (the authentication) and after; the read then ends within the linger.
func TestFrameReaderRefusesTooBigAtTheHeader(t *testing.T) {
	tooBig := append(binary.BigEndian.AppendUint16(nil, uint16(websocket.StatusMessageTooBig)), TooBigText...)
	for _, n := range []uint64{wire.MaxMessageSize + 1, 1 << 40, 1<<63 - 1} {
		for _, authenticating := range []bool{true, false} {
			r, peer := frameReaderPair(t, wire.MaxMessageSize)
			r.stall = testStall
			if _, err := peer.Write(announce(n)); err != nil {
				t.Fatal(err)
			}
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				var before time.Time
				if authenticating {
					before = time.Now().Add(10 * time.Second) // wall clock: a real socket's deadline
				}
				endWithin(t, r, EndTooBig, 5*testStall, before)
			}()
			// The close comes while the relay still lingers for the
			// payload, not after the socket's deadline.
			_ = peer.SetReadDeadline(time.Now().Add(testStall / 2)) // wall clock: a real socket's deadline
			expectFrame(t, peer, opClose, tooBig)
			<-ended
		}
	}
}

// TestFrameReaderEndsStalledMessages: a message whose bytes stop coming
// (60 KB announced, 100 bytes sent; a header cut short; a message in
// fragments whose last fragment never comes) ends with EndStalled once
// the stall bound has passed since it began, before and after the
// authentication; the wait between messages is not bounded by it.
func TestFrameReaderEndsStalledMessages(t *testing.T) {
	sixty := clientFrame(opBinary, true, make([]byte, 60_000))[:14+100]
	for name, stream := range map[string][]byte{
		"60 KB announced, 100 bytes sent": sixty,
		"a header cut short":              clientFrame(opBinary, true, make([]byte, 1000))[:3],
		"a missing last fragment":         clientFrame(opBinary, false, []byte("first")),
		"a control frame cut short":       clientFrame(opPing, true, []byte("ping"))[:7],
	} {
		for _, authenticating := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, authenticating %v", name, authenticating), func(t *testing.T) {
				r, peer := frameReaderPair(t, wire.MaxMessageSize)
				r.stall = testStall
				if _, err := peer.Write(stream); err != nil {
					t.Fatal(err)
				}
				var before time.Time
				if authenticating {
					before = time.Now().Add(10 * time.Second) // wall clock: a real socket's deadline
				}
				endWithin(t, r, EndStalled, 5*testStall, before)
			})
		}
	}
	t.Run("the authentication's deadline comes first", func(t *testing.T) {
		r, peer := frameReaderPair(t, wire.MaxMessageSize)
		r.stall = time.Hour
		if _, err := peer.Write(sixty); err != nil {
			t.Fatal(err)
		}
		endWithin(t, r, EndTimeout, 5*testStall, time.Now().Add(testStall)) // wall clock: a real socket's deadline
	})
	t.Run("idle between messages", func(t *testing.T) {
		r, peer := frameReaderPair(t, wire.MaxMessageSize)
		r.stall = testStall
		msg := clientFrame(opBinary, true, make([]byte, 30_000))
		// The first message in two parts, the second after the first
		// is read: it is bounded, not ended, by the stall bound.
		go func() {
			_, _ = peer.Write(msg[:1000])
			_, _ = peer.Write(msg[1000:])
		}()
		r.mustNext(t)
		// Then nothing for three stall bounds: an idle connection is
		// not stalled.
		go func() {
			<-time.After(3 * testStall) // wall clock: longer than the socket's stall deadline
			_, _ = peer.Write(msg)
		}()
		if got := len(r.mustNext(t)); got != 30_000 {
			t.Fatalf("read %d bytes, want 30,000", got)
		}
	})
}
