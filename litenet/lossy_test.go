package litenet

import (
	"fmt"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/udptest"
)

// Under 10% loss, duplicates and reordering, ReliableOrdered stays in
// order and complete, ReliableUnordered delivers each message exactly
// once, both ways.
func TestReliableUnderLossDuplicationReorder(t *testing.T) {
	bothVersions(t, reliableUnderLossDuplicationReorder)
}

func reliableUnderLossDuplicationReorder(t *testing.T) {
	srv := newRecorder(true)
	e := listen(t, Config{Handler: srv})
	proxy := udptest.NewLossyProxy(t, e.LocalAddr(), 0.10, 0.05, 0.10)
	cli := newRecorder(false)
	_, p := dial(t, proxy.Addr(), Config{Handler: cli})

	const nRO, nRU = 600, 300
	for i := range nRO {
		size := 20
		if i%50 == 0 {
			size = 4000 // fragments too
		}
		msg := fmt.Appendf(nil, "ro%05d-", i)
		msg = append(msg, pattern(size)...)
		if err := p.Send(ReliableOrdered, msg); err != nil {
			t.Fatal(err)
		}
		if i < nRU {
			if err := p.Send(ReliableUnordered, fmt.Appendf(nil, "ru%05d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(who string, r *recorder) {
		t.Helper()
		nextRO := 0
		ru := map[string]int{}
		for nextRO < nRO || len(ru) < nRU {
			ev := r.waitKind(t, "recv", 20*time.Second)
			switch ev.m {
			case ReliableOrdered:
				if want := fmt.Sprintf("ro%05d-", nextRO); string(ev.data[:8]) != want {
					t.Fatalf("%s: ReliableOrdered message %q, want %s", who, ev.data[:8], want)
				}
				nextRO++
			case ReliableUnordered:
				ru[string(ev.data)]++
				if ru[string(ev.data)] > 1 {
					t.Fatalf("%s: %s delivered twice", who, ev.data)
				}
			}
		}
	}
	check("server", srv)
	check("client", cli) // the echoes
}
