package flyaffinity

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/purrfly/purrfly/internal/testutil"
)

// Rule: exchange ends when its context is cancelled (miekg/dns honours only
// deadlines, so cancellation closes the socket) and reports the
// cancellation, not the closed socket.
func TestExchangeReportsCancellation(t *testing.T) {
	f := startDNS(t, "aaa sea")
	f.setDrop(true)
	cfg := testConfig(f, "aaa")
	cfg.LookupTimeout = 30 * time.Second
	r := newTestResolver(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := new(dns.Msg)
	m.SetQuestion("vms.purr-relay.internal.", dns.TypeTXT)
	done := make(chan error, 1)
	go func() {
		_, err := r.exchange(ctx, "udp", m)
		done <- err
	}()
	testutil.Eventually(t, 5*time.Second, "the question to reach DNS", func() bool { return f.queries.Load() == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled exchange = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exchange did not end when its context was cancelled")
	}
}
