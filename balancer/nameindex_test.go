package balancer

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestNameIndexAgainstASortedList: random inserts and removals of room
// entries keep the index equal to a sorted list of their names (checked
// through add, remove, after and at), chunks within their bounds, across
// splits and merges.
func TestNameIndexAgainstASortedList(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var x nameIndex
	in := map[string]*roomEntry{}
	sorted := func() []string {
		var l []string
		for n := range in {
			l = append(l, n)
		}
		slices.Sort(l)
		return l
	}
	names := func(es []*roomEntry) []string {
		var l []string
		for _, e := range es {
			l = append(l, e.name)
		}
		return l
	}
	for step := range 40000 {
		name := "r" + strconv.Itoa(rnd.IntN(5000))
		if e, ok := in[name]; ok && rnd.IntN(3) > 0 || ok && step > 30000 {
			x.remove(e)
			delete(in, name)
		} else if !ok && step <= 30000 {
			e := &roomEntry{name: name}
			x.add(e)
			in[name] = e
		}
		if step%997 != 0 {
			continue
		}
		want := sorted()
		var errs []string
		x.check("index", func(f string, _ ...any) { errs = append(errs, f) }, func(*roomEntry) {})
		if len(errs) > 0 {
			t.Fatalf("step %d: %v", step, errs)
		}
		if got := names(x.after("", len(want)+1, nil)); !slices.Equal(got, want) {
			t.Fatalf("step %d: the index lists %d names, want %d", step, len(got), len(want))
		}
		if x.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, x.len(), len(want))
		}
		if len(want) > 10 {
			i := rnd.IntN(len(want) - 5)
			if got := names(x.after(want[i], 3, nil)); !slices.Equal(got, want[i+1:i+4]) {
				t.Fatalf("step %d: after %q: %v, want %v", step, want[i], got, want[i+1:i+4])
			}
			if got := names(x.after(want[i]+"!", 2, nil)); !slices.Equal(got, want[i+1:i+3]) {
				t.Fatalf("step %d: after a name not in it: %v, want %v", step, got, want[i+1:i+3])
			}
			if got := names(x.at(i, 4, nil)); !slices.Equal(got, want[i:i+4]) {
				t.Fatalf("step %d: at %d: %v, want %v", step, i, got, want[i:i+4])
			}
		}
	}
	for _, e := range in {
		x.remove(e)
	}
	x.remove(&roomEntry{name: "r1"}) // not in it: nothing happens
	if x.len() != 0 || len(x.chunks) != 0 {
		t.Fatalf("emptied, the index holds %d entries in %d chunks", x.len(), len(x.chunks))
	}
}
