package udptransport

import (
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/core"
)

func TestMain(m *testing.M) {
	lockrank.EnableForTests()
	goleak.VerifyTestMain(m)
}

// TestUDPPingInterval: the relay pings its UDP peers every 900 ms, as
// PurrLay and PurrNet's client do (LiteNetLib's own default is 1 s), and
// drops a silent one after its timeout (UDP_TIMEOUT).
func TestUDPPingInterval(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := core.New(core.Config{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	var sessions sync.WaitGroup
	u, err := Listen(Config{Core: c, Metrics: reg, Host: "127.0.0.1", Timeout: 7 * time.Second, AuthTimeout: time.Second,
		Admit: func() bool { sessions.Add(1); return true }, Sessions: &sessions})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	cfg := u.ep.Load().Config()
	if cfg.PingInterval != 900*time.Millisecond || cfg.DisconnectTimeout != 7*time.Second {
		t.Fatalf("ping every %v, disconnect after %v; want 900ms and 7s", cfg.PingInterval, cfg.DisconnectTimeout)
	}
}

// TestLockOrderIsChecked: this package's tests run with the lock-rank
// checker on (internal/lockrank), benchmarks aside.
func TestLockOrderIsChecked(t *testing.T) {
	if flag.Lookup("test.bench").Value.String() == "" && !lockrank.Enabled() {
		t.Fatal("the lock-rank checker is off")
	}
}
