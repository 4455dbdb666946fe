package chaos

import (
	"os"
	"testing"

	"github.com/purrfly/purrfly/internal/testbin"
)

// purrctl is the purrctl binary every machine of the storm runs, built once.
var purrctl string

// TestMain builds purrctl, runs the tests and fails when a goroutine
// outlives them (goleak).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m, "chaos", &purrctl)) }
