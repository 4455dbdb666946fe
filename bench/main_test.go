package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the server child: Run re-executes this test binary
// with ServerEnv set (see childOptions), exactly as purrctl re-executes
// itself as `purrctl bench server`.
func TestMain(m *testing.M) {
	if IsServerChild() {
		if err := ServeChild(context.Background(), os.Stdin, os.Stdout, nil); err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// childOptions makes Run start this test binary as its server children.
func childOptions(o Options) Options {
	o.Executable = os.Args[0]
	o.ServerArgs = []string{"-test.run=^$"}
	return o
}
