package e2e

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// exitCode runs bin with args and env and returns its exit code and
// combined output.
func exitCode(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	c := exec.CommandContext(tctx(t), bin, args...)
	c.Env = append(localEnv(), env...)
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%v: %v", args, err)
	return 0, ""
}

// testExitCodes holds the README's exit-code table to the built binary
// (go run reports every failure as 1): success, failures, and the usage
// mistakes an operator makes, each exit 2 with one line.
func testExitCodes(t *testing.T, bin string) {
	key := []string{"ADMIN_KEY=e2e-admin-key-0123456789"}
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{nil, []string{"version"}, 0, "purrctl "},
		{nil, []string{"help"}, 0, "COMMANDS:"},
		{nil, []string{"smoke", "--balancer", "http://127.0.0.1:1", "--timeout", "2s", "--transport", "ws"}, 1, "purrctl: "},
		{key, []string{"fleet", "status", "--balancer", "http://127.0.0.1:1", "--timeout", "2s"}, 1, "purrctl: "},
		{nil, []string{"frob"}, 2, `unknown command "frob"`},
		{nil, []string{"smoke", "--balancer", "http://127.0.0.1:8080/path"}, 2, "no path, query or fragment"},
		{key, []string{"fleet", "rooms", "--phase", "playing"}, 2, "--phase must be waiting, active or vacant"},
		{nil, []string{"fleet"}, 2, "purrctl fleet needs a command"},
		{[]string{"HEARTBEAT_SECONDS=-5"}, []string{"relay"}, 2, "HEARTBEAT_SECONDS"},
		{nil, []string{"chaos", "--rooms", "100"}, 2, "--rooms must be 1 to 64"},
		{nil, []string{"chaos", "--players", "20"}, 2, "--players must be 1 to 8"},
		{nil, []string{"chaos", "--duration", "5s"}, 2, "--duration must be at least 1m0s"},
		{nil, []string{"rollout", "prod", "--image", "x", "--machines-api", "http://127.0.0.1:1/v1"}, 2, "no path, query or fragment"},
	} {
		code, out := exitCode(t, bin, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("purrctl %s: exit %d, want %d with %q; output:\n%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out)
		}
		if tc.code == 2 && strings.Count(out, "\n") != 1 {
			t.Errorf("purrctl %s: a usage mistake said %d lines, want one:\n%s", strings.Join(tc.args, " "), strings.Count(out, "\n"), out)
		}
	}
}

// testBenchInterrupted: Ctrl-C during a connection soak is an
// interruption (exit 130, said so), not a failed soak: the relay still
// holding the round's connections is what a stop looks like, not a leak.
func testBenchInterrupted(t *testing.T, bin string) {
	p := startProc(t, bin, localEnv(), regexp.MustCompile(`(soak round done)`),
		"bench", "--soak", "200", "--rounds", "50", "--soak-timeout", "1s", "--debug")
	p.match(t)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.waited:
	case <-time.After(60 * time.Second):
		t.Fatalf("bench still running 60 s after SIGINT:\n%s", p.output())
	}
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("bench --soak after SIGINT: %v, want exit 130\n%s", p.waitErr, p.output())
	}
	out := p.output()
	if !strings.Contains(out, "purrctl: interrupted: the benchmark stopped") || strings.Contains(out, "still holds") {
		t.Fatalf("bench --soak after SIGINT said:\n%s\nwant that it was interrupted, and no judgement of the relay", out)
	}
}
