package litenet

import "testing"

func TestWheelDueAndReschedule(t *testing.T) {
	const tick = 10
	w := newWheel(tick, 0)
	a, b, c := &Peer{wheelSlot: -1}, &Peer{wheelSlot: -1}, &Peer{wheelSlot: -1}
	w.set(a, 25)
	w.set(b, 5*wheelSlots*tick) // beyond the span: parked in the farthest slot
	w.set(c, 25)
	w.set(c, 0) // removed
	if got := w.due(19, nil); len(got) != 0 {
		t.Fatalf("due at 19: %d", len(got))
	}
	if got := w.due(29, nil); len(got) != 1 || got[0] != a {
		t.Fatalf("due at 29: %v", got)
	}
	if w.n != 1 {
		t.Fatalf("%d in the wheel, want b only", w.n)
	}
	// b comes back around until its deadline.
	for now := int64(30); now < 5*wheelSlots*tick; now += wheelSlots * tick / 2 {
		if got := w.due(now, nil); len(got) != 0 {
			t.Fatalf("b due early at %d", now)
		}
	}
	if got := w.due(5*wheelSlots*tick, nil); len(got) != 1 || got[0] != b {
		t.Fatalf("b not due at its deadline: %v", got)
	}
	if w.n != 0 {
		t.Fatalf("%d left", w.n)
	}
}
