package litenet

import (
	"fmt"
	"testing"
	"time"
)

// Under Config.SendFlushes a Send from outside the reader leaves on the
// sender's goroutine: the datagram is written when Send returns, with no
// hand-off to the flusher. Without it the flusher writes it a moment later
// (the second case, which the first must differ from).
func TestSendFlushesOnTheSendersGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inline bool
	}{{"SendFlushes", true}, {"flusher", false}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeClock()
			srv := newRecorder(false)
			e := listen(t, Config{Handler: srv, Clock: clk})
			ce, p := dial(t, e.LocalAddr(), Config{Handler: newRecorder(false), Clock: clk, SendFlushes: tc.inline})
			const n = 20
			written := 0
			for i := range n {
				settle(t, e, ce)
				before := ce.Stats().Sent
				if err := p.Send(Unreliable, fmt.Appendf(nil, "m%d", i)); err != nil {
					t.Fatal(err)
				}
				if ce.Stats().Sent == before+1 {
					written++
				}
			}
			// A flush running at the moment (the flusher woken by a
			// deadline the last send moved) takes the odd one: most, not
			// all, leave at once with SendFlushes, and next to none without.
			if tc.inline && written < n/2 {
				t.Errorf("%d of %d sends written when Send returned, want most", written, n)
			}
			if !tc.inline && written >= n/2 {
				t.Errorf("%d of %d sends written when Send returned without SendFlushes: the case cannot tell the two apart", written, n)
			}
			if got := len(srv.collect(t, n, 5*time.Second)); got != n {
				t.Errorf("server got %d messages, want %d", got, n)
			}
		})
	}
}
