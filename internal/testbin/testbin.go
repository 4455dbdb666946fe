// Package testbin builds the purrctl binary for the test packages whose
// tests run it as real processes (flysim machines, the commands under
// test): once per test binary, into a temporary folder removed at the
// end, with a bounded build, and with goleak's check after the tests.
package testbin

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

// buildTimeout bounds the build (a cold cache makes it the slowest step).
const buildTimeout = 3 * time.Minute

// Build builds github.com/purrfly/purrfly/cmd/purrctl into dir and
// returns the binary's path.
func Build(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	bin := filepath.Join(dir, "purrctl")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/purrfly/purrfly/cmd/purrctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/purrctl: %w\n%s", err, out)
	}
	return bin, nil
}

// Main is a TestMain body: it builds purrctl into a temporary folder,
// stores its path in *bin, runs the tests and then fails the binary when
// a goroutine outlives them. name prefixes its messages.
func Main(m *testing.M, name string, bin *string) int {
	dir, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, name+": temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	if code := m.Run(); code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, name+": leaked goroutines:", err)
		return 1
	}
	return 0
}
