package testutil

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// ClientFrom is an HTTP client whose connections leave from the loopback
// address local (any of 127.0.0.0/8), so the server sees that source: a
// test of per-source limits gets as many sources as it needs.
func ClientFrom(tb testing.TB, local string) *http.Client {
	tb.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// StatusCounts sends n requests built by newReq, all at once on c, and
// counts their answers by status code (0: no answer).
func StatusCounts(c *http.Client, n int, newReq func() (*http.Request, error)) map[int]int {
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := newReq()
			if err != nil {
				statuses <- 0
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for st := range statuses {
		counts[st]++
	}
	return counts
}
