package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// purrctl is the binary every machine of the storm runs, built once.
var purrctl string

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run builds purrctl, runs the tests and fails when a goroutine outlives
// them (goleak).
func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	purrctl = filepath.Join(dir, "purrctl")
	build := exec.CommandContext(ctx, "go", "build", "-o", purrctl, "./cmd/purrctl")
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: go build ./cmd/purrctl: %v\n%s", err, out)
		return 1
	}
	if code := m.Run(); code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: leaked goroutines:", err)
		return 1
	}
	return 0
}
