package limit

import (
	"testing"
	"time"
)

// TestPaced: the first event goes through, the next ones within the gap
// are only counted, and the first after the gap goes through with the
// count of all since the last one (itself included).
func TestPaced(t *testing.T) {
	p := Paced{Gap: 10 * time.Second}
	t0 := time.Unix(1_800_000_000, 0)
	if ok, n := p.Note(t0); !ok || n != 1 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := 1; i <= 4; i++ {
		if ok, _ := p.Note(t0.Add(time.Duration(i) * 2 * time.Second)); ok {
			t.Fatalf("event %d within the gap went through", i)
		}
	}
	if ok, n := p.Note(t0.Add(10 * time.Second)); !ok || n != 5 {
		t.Fatalf("after the gap: %v %d, want through with 5 (four counted and this one)", ok, n)
	}
	if ok, _ := p.Note(t0.Add(19 * time.Second)); ok {
		t.Fatal("the gap runs from the last event let through")
	}
}
