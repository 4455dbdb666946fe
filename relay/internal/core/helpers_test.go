package core

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

func TestMain(m *testing.M) {
	lockrank.EnableForTests()
	goleak.VerifyTestMain(m)
}

func testLogger() *slog.Logger {
	if os.Getenv("RELAY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func sendOne(target wire.ConnID, payload string) []byte {
	return wire.AppendSendOne(nil, target, []byte(payload))
}

func equal(a []byte, b string) bool { return bytes.Equal(a, []byte(b)) }

func itoa(n int) string { return strconv.Itoa(n) }

// counterValue reads a Prometheus counter or gauge.
func counterValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// unframeUDP is what the UDP transport does to a message of a peer in
// PurrNet's UDP framing before the core routes it (its delivery method
// taken out, wire.UDPMethod), for the core's tests, fuzz target and
// benchmarks of UDP-framed peers. It is udpframe.Unframe written again on
// purpose: udpframe imports the core, so this package's own tests cannot
// import it, and the framing stays out of the core, which knows no
// transport. A change to one is a change to both.
func unframeUDP(c *Core, cn *Conn, b *buf.Buf) bool {
	var from wire.Sender
	switch {
	case cn.Closing():
		return true
	case cn.Role() == RoleClient:
		from = wire.FromClient
	case cn.Role() == RoleHost:
		from = wire.FromHost
	case cn.Role() == RolePipe:
		from = wire.FromPipe
	default:
		return true
	}
	d, at, err := wire.UDPMethod(from, b.Frame())
	if err != nil {
		buf.Put(b)
		c.DropMalformed(err)
		return false
	}
	if at >= 0 {
		b.Method = d
		b.CutAt(at)
	}
	return true
}

// TestLockOrderIsChecked: this package's tests run with the lock-rank
// checker on (internal/lockrank), benchmarks aside.
func TestLockOrderIsChecked(t *testing.T) {
	if flag.Lookup("test.bench").Value.String() == "" && !lockrank.Enabled() {
		t.Fatal("the lock-rank checker is off")
	}
}

// TestLockOrderInversionFires takes the core's own locks the wrong way
// round on purpose: a room's lock, then the room table's shard (which an
// allocation takes first). The checker stops the second before it is
// taken and names both.
func TestLockOrderInversionFires(t *testing.T) {
	if !lockrank.Enabled() {
		t.Skip("the checker is off (benchmarks)")
	}
	c := testCore(t, nil)
	if _, err := c.Allocate("inverted", "id"); err != nil {
		t.Fatal(err)
	}
	r := c.rooms.get("inverted")
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, lockrank.RoomTable.String()) || !strings.Contains(msg, lockrank.Room.String()) {
			t.Fatalf("taking the room table under a room's lock: %q, want the checker's refusal", msg)
		}
	}()
	c.rooms.get("inverted")
}
