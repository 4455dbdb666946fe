package buf

import "testing"

// TestBuffersComeFromTheSmallestClassThatHolds: a frame pins the smallest
// pooled buffer that holds it (queue bounds count the buffer), and a
// reader that never ends gets ErrTooBig once the largest class is
// full, whatever limit it was given.
func TestBuffersComeFromTheSmallestClassThatHolds(t *testing.T) {
	for _, size := range sizeClasses {
		if w := Get(size).Weight(); w != size {
			t.Fatalf("a %d-byte frame got a %d-byte buffer", size, w)
		}
	}
	if b, err := ReadInto(endless{}, 0, 1<<30); err != ErrTooBig {
		t.Fatalf("an endless message: %v (buffer %v), want ErrTooBig", err, b != nil)
	}
}

// endless is a reader whose message never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestCutAt: taking a byte out of the frame keeps the bytes on both sides
// in order, and counts it as cut.
func TestCutAt(t *testing.T) {
	for at := range 6 {
		b := Of(0, 1, 2, 3, 4, 5)
		b.CutAt(at)
		want := []byte{0, 1, 2, 3, 4, 5}
		want = append(want[:at:at], want[at+1:]...)
		if string(b.Frame()) != string(want) || b.Cut != 1 {
			t.Errorf("cut at %d: % x (cut %d), want % x", at, b.Frame(), b.Cut, want)
		}
		Put(b)
	}
}

// TestUnpooled: a buffer larger than every class is never put in a pool.
func TestUnpooled(t *testing.T) {
	b := Unpooled(MaxSize + 1)
	Put(b)
	if g := Get(MaxSize); len(g.B) != MaxSize {
		t.Fatalf("the largest class handed out a %d-byte buffer", len(g.B))
	}
}
