package rollout_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// purrctlBin is the purrctl binary every sim machine runs (built once).
var purrctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rollout-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	purrctlBin = filepath.Join(dir, "purrctl")
	cmd := exec.Command("go", "build", "-o", purrctlBin, "github.com/purrfly/purrfly/cmd/purrctl")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to build purrctl:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}
