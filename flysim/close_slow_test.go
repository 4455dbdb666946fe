//go:build unix

package flysim

import (
	"testing"
	"time"
)

// TestCloseAfterSlowStops: machines that ignore their kill signal hold
// Close for their whole kill_timeout, past the proxies' and the API's
// shutdown bound; the DNS server, closed last, still shuts down cleanly
// (it once shared that bound and failed Close with "failed to shut DNS
// down: context deadline exceeded", making `purrctl sim` exit 1 on
// SIGINT).
func TestCloseAfterSlowStops(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].KillTimeout = Duration{5500 * time.Millisecond}
	for _, m := range cfg.Apps[0].Machines {
		m.Image = "child:stubborn"
	}
	s := startSim(t, cfg)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("close after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
}
