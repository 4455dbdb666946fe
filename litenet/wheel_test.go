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

// A flush with nothing due reads no slot, not even one a tick, and
// skipping ahead loses no peer: one set earlier than every other after the skip, one parked
// beyond the span and put back, and one set in a tick already passed are
// each due at their time, never early.
func TestWheelSkipsWhenNothingIsDue(t *testing.T) {
	const tick = 10
	w := newWheel(tick, 0)
	far, soon, late := &Peer{wheelSlot: -1}, &Peer{wheelSlot: -1}, &Peer{wheelSlot: -1}
	w.set(far, 900)
	w.slots[(200/tick)%wheelSlots] = &Peer{wheelSlot: -1} // a stray a walk would find: none must
	for now := int64(0); now < 400; now += 7 {
		if got := w.due(now, nil); len(got) != 0 {
			t.Fatalf("due at %d: %d peers", now, len(got))
		}
	}
	w.slots[(200/tick)%wheelSlots] = nil
	w.set(soon, 450) // earlier than far, after the skips
	if got := w.due(449, nil); len(got) != 0 {
		t.Fatalf("soon due early: %d", len(got))
	}
	if got := w.due(455, nil); len(got) != 1 || got[0] != soon {
		t.Fatalf("due at 455: %v, want soon", got)
	}
	w.set(late, 100) // a deadline already passed goes to the current tick
	w.set(soon, 3*wheelSlots*tick)
	if got := w.due(460, nil); len(got) != 1 || got[0] != late {
		t.Fatalf("due at 460: %v, want late", got)
	}
	// That walk found far's slot next: the ticks until it are not walked
	// again, one by one.
	w.slots[(600/tick)%wheelSlots] = &Peer{wheelSlot: -1}
	if got := w.due(605, nil); len(got) != 0 {
		t.Fatalf("due at 605: %d peers", len(got))
	}
	w.slots[(600/tick)%wheelSlots] = nil
	if got := w.due(905, nil); len(got) != 1 || got[0] != far {
		t.Fatalf("due at 905: %v, want far", got)
	}
	for now := int64(1000); now < 3*wheelSlots*tick; now += wheelSlots * tick / 3 {
		if got := w.due(now, nil); len(got) != 0 {
			t.Fatalf("soon due early at %d", now)
		}
	}
	if got := w.due(3*wheelSlots*tick, nil); len(got) != 1 || got[0] != soon || w.n != 0 {
		t.Fatalf("soon not due at its deadline: %v (%d left)", got, w.n)
	}
}
