package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purrfly/purrfly/internal/testutil"
)

// hexKey is a generated admin key: 64 hex digits.
var hexKey = regexp.MustCompile(`[0-9a-f]{64}`)

// testGeneratedAdminKey: a balancer without ADMIN_KEY shows the key it
// generated on its controlling terminal only, never on stdout or stderr
// (where its logs go); with no terminal it shows it nowhere and its log
// says how to choose one.
func testGeneratedAdminKey(t *testing.T, bin string) {
	t.Run("no-terminal", func(t *testing.T) {
		b := startBalancer(t, bin, nil)
		defer stopBalancer(t, b)
		b.match(t)
		testutil.Eventually(t, 10*time.Second, "the balancer to say it has no terminal", func() bool {
			return strings.Contains(b.output(), "no terminal is attached")
		})
		if strings.Contains(b.output(), "generated for this process") || hexKey.MatchString(b.output()) {
			t.Fatalf("the generated key reached stdout or stderr:\n%s", b.output())
		}
	})
	t.Run("terminal", func(t *testing.T) {
		ptm, pts, err := openPTY()
		if err != nil {
			t.Skipf("no pseudo-terminal here: %v", err)
		}
		defer ptm.Close()
		b := startBalancer(t, bin, pts)
		pts.Close() // the child holds it now
		defer stopBalancer(t, b)
		b.match(t)
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(ptm)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		select {
		case line := <-lines:
			if !strings.Contains(line, "admin key for") || !hexKey.MatchString(line) {
				t.Fatalf("the terminal shows %q, want the generated key", line)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("nothing on the terminal after 20 s; output:\n%s", b.output())
		}
		if hexKey.MatchString(b.output()) {
			t.Fatalf("the generated key also reached stdout or stderr:\n%s", b.output())
		}
	})
}

// startBalancer runs `purrctl balancer` in a session of its own, without
// ADMIN_KEY; with tty, that pseudo-terminal is its controlling terminal.
func startBalancer(t *testing.T, bin string, tty *os.File) *proc {
	t.Helper()
	var env []string
	for _, kv := range localEnv() {
		if !strings.HasPrefix(kv, "ADMIN_KEY=") {
			env = append(env, kv)
		}
	}
	attr := &syscall.SysProcAttr{Setsid: true}
	var extra []*os.File
	if tty != nil {
		extra = []*os.File{tty} // fd 3 in the child
		attr.Setctty, attr.Ctty = true, 3
	}
	return startProcWith(t, bin, env, regexp.MustCompile(`msg="balancer started" url=(http://\S+)`),
		func(c *exec.Cmd) { c.SysProcAttr, c.ExtraFiles = attr, extra },
		"balancer", "--port", "0", "--host", "127.0.0.1")
}

func stopBalancer(t *testing.T, b *proc) {
	t.Helper()
	b.interrupt(t, 10*time.Second)
}

// openPTY opens a pseudo-terminal pair (Linux's /dev/ptmx).
func openPTY() (ptm, pts *os.File, err error) {
	ptm, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(ptm.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		ptm.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		ptm.Close()
		return nil, nil, err
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		return nil, nil, err
	}
	return ptm, pts, nil
}
