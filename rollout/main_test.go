package rollout_test

import (
	"os"
	"testing"

	"github.com/purrfly/purrfly/internal/testbin"
)

// purrctlBin is the purrctl binary every sim machine runs, built once.
var purrctlBin string

// TestMain builds purrctl, runs the tests and fails when a goroutine
// outlives them (goleak).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m, "rollout", &purrctlBin)) }
