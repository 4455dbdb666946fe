package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Bounds of one /metrics read of a relay child.
const (
	scrapeTimeout = 5 * time.Second
	scrapeLimit   = 4 << 20
)

// relayCounters are a relay child's counters, read from its /metrics
// around a run: the edge relay's forwarding counters in the forwarding
// mode, the LiteNetLib socket's datagrams in a UDP run.
type relayCounters struct {
	forwards float64 // purrfly_relay_mesh_forwards_total{result="ok"}: links opened
	packets  float64 // purrfly_relay_forwarded_packets_total{dir="mesh_out"|"mesh_in"}
	udpIn    float64 // purrfly_relay_udp_datagrams_received_total
	udpOut   float64 // purrfly_relay_udp_datagrams_sent_total
	// A WebSocket run's write path: frames its readers wrote to their
	// receivers' sockets themselves, and batches its writers wrote.
	direct  float64 // purrfly_relay_direct_writes_total{result="whole"|"partial"}
	batches float64 // purrfly_relay_write_batches_total
	// The connection soak's gauges.
	goroutines float64 // go_goroutines
	fds        float64 // process_open_fds
	conns      float64 // purrfly_relay_connections (authenticated)
	rooms      float64 // purrfly_relay_rooms
	refused    float64 // purrfly_relay_refused_upgrades_total, every reason
}

// scrapeRelay reads the counters from a relay's /metrics URL.
func scrapeRelay(ctx context.Context, hc *http.Client, metricsURL string) (relayCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return relayCounters{}, fmt.Errorf("failed to read the relay's metrics: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return relayCounters{}, fmt.Errorf("failed to read the relay's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return relayCounters{}, fmt.Errorf("failed to read the relay's metrics: HTTP %d", resp.StatusCode)
	}
	var c relayCounters
	sc := bufio.NewScanner(io.LimitReader(resp.Body, scrapeLimit))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, `purrfly_relay_mesh_forwards_total{result="ok"} `):
			c.forwards += sampleValue(line)
		case strings.HasPrefix(line, `purrfly_relay_forwarded_packets_total{dir="mesh_out"} `),
			strings.HasPrefix(line, `purrfly_relay_forwarded_packets_total{dir="mesh_in"} `):
			c.packets += sampleValue(line)
		case strings.HasPrefix(line, "purrfly_relay_udp_datagrams_received_total "):
			c.udpIn += sampleValue(line)
		case strings.HasPrefix(line, "purrfly_relay_udp_datagrams_sent_total "):
			c.udpOut += sampleValue(line)
		case strings.HasPrefix(line, `purrfly_relay_direct_writes_total{result="whole"} `),
			strings.HasPrefix(line, `purrfly_relay_direct_writes_total{result="partial"} `):
			c.direct += sampleValue(line)
		case strings.HasPrefix(line, "purrfly_relay_write_batches_total "):
			c.batches += sampleValue(line)
		case strings.HasPrefix(line, "go_goroutines "):
			c.goroutines = sampleValue(line)
		case strings.HasPrefix(line, "process_open_fds "):
			c.fds = sampleValue(line)
		case strings.HasPrefix(line, "purrfly_relay_connections "):
			c.conns = sampleValue(line)
		case strings.HasPrefix(line, "purrfly_relay_rooms "):
			c.rooms = sampleValue(line)
		case strings.HasPrefix(line, "purrfly_relay_refused_upgrades_total"):
			c.refused += sampleValue(line)
		}
	}
	if err := sc.Err(); err != nil {
		return relayCounters{}, fmt.Errorf("failed to read the relay's metrics: %w", err)
	}
	return c, nil
}

// sampleValue is the value of a Prometheus text-format sample line
// without a timestamp (0 when it does not parse).
func sampleValue(line string) float64 {
	i := strings.LastIndexByte(line, ' ')
	v, err := strconv.ParseFloat(line[i+1:], 64)
	if err != nil {
		return 0
	}
	return v
}
