package litenet

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/lockrank"
)

func TestMain(m *testing.M) {
	lockrank.EnableForTests()
	goleak.VerifyTestMain(m)
}

// TestLockOrderIsChecked: this package's tests run with the lock-rank
// checker on (internal/lockrank), benchmarks aside.
func TestLockOrderIsChecked(t *testing.T) {
	if flag.Lookup("test.bench").Value.String() == "" && !lockrank.Enabled() {
		t.Fatal("the lock-rank checker is off")
	}
}
