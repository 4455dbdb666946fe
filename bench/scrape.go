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

// meshCounters are the edge relay's forwarding counters, read from its
// /metrics around a forwarding-mode run.
type meshCounters struct {
	forwards float64 // purrfly_relay_mesh_forwards_total{result="ok"}: links opened
	packets  float64 // purrfly_relay_forwarded_packets_total{dir="mesh_out"|"mesh_in"}
}

// scrapeMesh reads the mesh counters from a relay's /metrics URL.
func scrapeMesh(ctx context.Context, hc *http.Client, metricsURL string) (meshCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return meshCounters{}, fmt.Errorf("failed to read the edge relay's metrics: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return meshCounters{}, fmt.Errorf("failed to read the edge relay's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return meshCounters{}, fmt.Errorf("failed to read the edge relay's metrics: HTTP %d", resp.StatusCode)
	}
	var c meshCounters
	sc := bufio.NewScanner(io.LimitReader(resp.Body, scrapeLimit))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, `purrfly_relay_mesh_forwards_total{result="ok"} `):
			c.forwards += sampleValue(line)
		case strings.HasPrefix(line, `purrfly_relay_forwarded_packets_total{dir="mesh_out"} `),
			strings.HasPrefix(line, `purrfly_relay_forwarded_packets_total{dir="mesh_in"} `):
			c.packets += sampleValue(line)
		}
	}
	if err := sc.Err(); err != nil {
		return meshCounters{}, fmt.Errorf("failed to read the edge relay's metrics: %w", err)
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
