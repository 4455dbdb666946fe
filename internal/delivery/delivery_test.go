package delivery

import (
	"testing"

	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// TestConversion: each of PurrNet's delivery method bytes is sent as the
// LiteNetLib method of the same name, and each method litenet delivers is
// read back as that byte; a byte that is no method stays invalid on both
// sides.
func TestConversion(t *testing.T) {
	for _, tc := range []struct {
		d wire.Delivery
		m litenet.Method
	}{
		{wire.ReliableUnordered, litenet.ReliableUnordered},
		{wire.Sequenced, litenet.Sequenced},
		{wire.ReliableOrdered, litenet.ReliableOrdered},
		{wire.ReliableSequenced, litenet.ReliableSequenced},
		{wire.Unreliable, litenet.Unreliable},
	} {
		if got := Method(tc.d); got != tc.m {
			t.Errorf("delivery %d is sent as %v, want %v", tc.d, got, tc.m)
		}
		if got := Of(tc.m); got != tc.d {
			t.Errorf("%v is read as delivery %d, want %d", tc.m, got, tc.d)
		}
		if !tc.d.Valid() || !tc.m.Valid() {
			t.Errorf("%v (%d) is not valid on both sides", tc.m, tc.d)
		}
	}
	for d := wire.Unreliable + 1; d != 0; d++ {
		if d.Valid() || Method(d).Valid() {
			t.Fatalf("byte %d is a delivery method on one side", d)
		}
	}
}
