package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
)

// TestPurrctl builds purrctl once, as a game developer would run it from a
// checkout, and runs it as a separate process.
func TestPurrctl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the purrctl binary")
	}
	began := time.Now()
	bin := filepath.Join(t.TempDir(), "purrctl")
	// A cold build cache makes this the slowest step by far; bound it
	// generously, apart from the per-step timeout.
	bctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(bctx, "go", "build", "-o", bin, "./cmd/purrctl")
	build.Dir = moduleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/purrctl: %v\n%s", err, out)
	}
	t.Logf("built purrctl in %v", time.Since(began).Round(time.Millisecond))

	// `purrctl dev --port 0` prints the balancer URL; `purrctl smoke`
	// against it exits 0, and so does `purrctl smoke --migration`; the
	// migration lease comes from the environment; SIGINT stops dev
	// cleanly and promptly.
	t.Run("dev-then-smoke", func(t *testing.T) {
		env := append(localEnv(), "MIGRATION_HOST_ACTIVATION_TIMEOUT_SECONDS=3")
		dev := startProc(t, bin, env, regexp.MustCompile(`Master server \(paste into PurrTransport\): (http://\S+)`), "dev", "--port", "0")
		url := dev.match(t)
		if strings.HasSuffix(url, ":0") || strings.HasSuffix(url, ":8080") {
			t.Fatalf("dev --port 0 printed %s, want the ephemeral port it bound", url)
		}
		api := newAPI(t, url)
		// It prints the admin API's base and the stack's generated key, which works there.
		adminKey := regexp.MustCompile(`Admin key: ([0-9a-f]{64})`)
		testutil.Eventually(t, 5*time.Second, "purrctl dev to print its admin key", func() bool { return adminKey.MatchString(dev.output()) })
		if !strings.Contains(dev.output(), "Admin API: "+url+"/v1") {
			t.Fatalf("purrctl dev did not print the admin API's base:\n%s", dev.output())
		}
		if st, err := client.NewAdmin(url, adminKey.FindStringSubmatch(dev.output())[1]).Stats(tctx(t)); err != nil || st.Relays != 2 {
			t.Fatalf("/v1/stats with the printed key: %+v %v", st, err)
		}
		if servers, err := api.Servers(tctx(t)); err != nil || len(servers) != 2 {
			t.Fatalf("/servers of %s = %v, %v; want the two dev relays", url, servers, err)
		}
		smoke := exec.CommandContext(tctx(t), bin, "smoke", "--balancer", url, "--timeout", "10s")
		smoke.Env = localEnv()
		out, err := smoke.CombinedOutput()
		if err != nil {
			t.Fatalf("purrctl smoke --balancer %s: %v\n%s\ndev output:\n%s", url, err, out, dev.output())
		}
		t.Logf("purrctl smoke:\n%s", out)
		for _, tr := range []string{"ws", "udp"} {
			if !strings.Contains(string(out), "smoke passed over "+tr) {
				t.Fatalf("purrctl smoke against purrctl dev did not pass over %s:\n%s", tr, out)
			}
		}
		testutil.Eventually(t, 5*time.Second, "the smoke room to leave /list", func() bool {
			l, err := api.List(t.Context(), 0)
			return err == nil && l.Total == 0
		})
		mig := exec.CommandContext(tctx(t), bin, "smoke", "--balancer", url, "--migration", "--timeout", "10s")
		mig.Env = localEnv()
		if out, err := mig.CombinedOutput(); err != nil || strings.Count(string(out), "migration smoke passed over") != 2 {
			t.Fatalf("purrctl smoke --migration --balancer %s: %v\n%s", url, err, out)
		}
		if lease := claimLease(t, api); lease != 3*time.Second {
			t.Fatalf("MIGRATION_HOST_ACTIVATION_TIMEOUT_SECONDS=3 purrctl dev: a claim's lease is %v", lease)
		}
		dev.interrupt(t, 10*time.Second)
		if _, _, err := api.Ping(tctx(t), url); err == nil {
			t.Fatal("the dev balancer still answers after purrctl dev exited")
		}
	})

	// `purrctl sim` brings up fly/sim.toml; smoke passes through its
	// proxies; stopping it leaves no machine process behind.
	t.Run("sim-then-smoke", func(t *testing.T) { testSimCommand(t, bin) })

	// FLY_MACHINE_ID and FLY_IMAGE_REF reach /ping.
	t.Run("balancer-ping-from-env", func(t *testing.T) {
		env := append(localEnv(), "FLY_MACHINE_ID=e2e-machine", "FLY_IMAGE_REF=registry.fly.io/e2e:1", "SECRET="+testSecret)
		b := startProc(t, bin, env, regexp.MustCompile(`msg="balancer started" url=(http://\S+)`), "balancer", "--port", "0", "--host", "127.0.0.1")
		url := b.match(t)
		p, _, err := newAPI(t, url).Ping(tctx(t), url)
		if err != nil || p.MachineID != "e2e-machine" || p.ImageRef != "registry.fly.io/e2e:1" || p.BootID == "" || p.Role != "balancer" {
			t.Fatalf("/ping = %+v, %v; want the machine id and image ref from the environment", p, err)
		}
		b.interrupt(t, 10*time.Second)
	})

	t.Run("exit-codes", func(t *testing.T) { testExitCodes(t, bin) })
	t.Run("bench-interrupted", func(t *testing.T) { testBenchInterrupted(t, bin) })
	t.Run("generated-admin-key", func(t *testing.T) { testGeneratedAdminKey(t, bin) })

	// A bad SECRET, or none on Fly, is a usage error (exit 2) that says so
	// and never echoes the value.
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"secret-with-space", []string{"SECRET=hunter 2 x"}, "SECRET"},
		{"fly-without-secret", []string{"FLY_APP_NAME=e2e-app"}, "SECRET must be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"balancer", "relay"} {
				c := exec.CommandContext(tctx(t), bin, cmd, "--port", "0")
				c.Env = append(localEnv(), tc.env...)
				out, err := c.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 {
					t.Fatalf("purrctl %s with %v: %v, want exit code 2\n%s", cmd, tc.env, err, out)
				}
				if !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "hunter 2") {
					t.Fatalf("purrctl %s with %v said %q; want a message about %s without the value", cmd, tc.env, out, tc.want)
				}
			}
		})
	}
}

// proc is a purrctl process whose output is scanned for one pattern.
type proc struct {
	cmd     *exec.Cmd
	out     testutil.Buffer
	found   chan string   // the pattern's first submatch, once
	waited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // written before waited is closed
}

// startProc starts bin with args and env, scanning stdout and stderr for re.
// The process is killed (by its own pid) at cleanup if still running.
func startProc(t testing.TB, bin string, env []string, re *regexp.Regexp, args ...string) *proc {
	t.Helper()
	return startProcWith(t, bin, env, re, nil, args...)
}

// startProcWith is startProc with setup applied to the command before it
// starts (process attributes, extra files).
func startProcWith(t testing.TB, bin string, env []string, re *regexp.Regexp, setup func(*exec.Cmd), args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), found: make(chan string, 1), waited: make(chan struct{})}
	p.cmd.Env = env
	if setup != nil {
		setup(p.cmd)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var readers sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		readers.Go(func() {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				p.out.Write(append(sc.Bytes(), '\n'))
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					once.Do(func() { p.found <- m[1] })
				}
			}
			_, _ = io.Copy(io.Discard, r)
		})
	}
	go func() {
		readers.Wait() // Wait must follow the end of the pipes' reads
		p.waitErr = p.cmd.Wait()
		close(p.waited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.waited:
			return
		default:
		}
		_ = p.cmd.Process.Kill()
		select {
		case <-p.waited:
		case <-time.After(10 * time.Second):
		}
	})
	return p
}

// match waits for the pattern's first submatch.
func (p *proc) match(t testing.TB) string {
	t.Helper()
	select {
	case s := <-p.found:
		return s
	case <-p.waited:
		t.Fatalf("%s exited early: %v\n%s", p.cmd.Args, p.waitErr, p.output())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed nothing matching after 30 s\n%s", p.cmd.Args, p.output())
	}
	return ""
}

// interrupt sends SIGINT and expects a clean exit within timeout.
func (p *proc) interrupt(t testing.TB, timeout time.Duration) {
	t.Helper()
	sent := time.Now()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.waited:
		if p.waitErr != nil {
			t.Fatalf("%s after SIGINT: %v\n%s", p.cmd.Args, p.waitErr, p.output())
		}
		t.Logf("%s exited %v after SIGINT", p.cmd.Args[1], time.Since(sent).Round(time.Millisecond))
	case <-time.After(timeout):
		t.Fatalf("%s still running %v after SIGINT\n%s", p.cmd.Args, timeout, p.output())
	}
}

func (p *proc) output() string { return p.out.String() }

// moduleRoot is the directory of the go.mod this package belongs to.
func moduleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside a Go module")
	}
	return filepath.Dir(gomod)
}

// localEnv is this process's environment without Fly's variables or a
// SECRET, so purrctl runs as on a developer's machine.
func localEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLY_") && !strings.HasPrefix(kv, "SECRET=") {
			out = append(out, kv)
		}
	}
	return out
}
