package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// TestEventStreamIdle: a stream whose lines (pings included) keep coming
// within its idle timeout stays open; one that falls silent for the whole
// timeout (a half-open connection: no error ever comes) is closed and
// Next says why, where it would have waited forever.
func TestEventStreamIdle(t *testing.T) {
	send := make(chan string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case line := <-send:
				fmt.Fprint(w, line)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := NewEventStream(resp.Body).WithIdle(clk, 45*time.Second)
	defer s.Close()
	next := func() (Frame, error) {
		t.Helper()
		type res struct {
			f   Frame
			err error
		}
		ch := make(chan res, 1)
		go func() { f, err := s.Next(); ch <- res{f, err} }()
		select {
		case r := <-ch:
			return r.f, r.err
		case <-time.After(5 * time.Second): // wall clock: bounds a test that would hang
			t.Fatal("Next still waits")
			return Frame{}, nil
		}
	}
	for range 3 { // a ping every 30 s keeps it open
		go func() { send <- ": ping\n\n" }()
		if f, err := next(); err != nil || f.Comment != "ping" {
			t.Fatalf("ping: %+v %v", f, err)
		}
		clk.Advance(30 * time.Second)
	}
	clk.Advance(15 * time.Second) // 45 s since the last line
	if _, err := next(); !errors.Is(err, ErrEventStreamIdle) {
		t.Fatalf("a silent stream: %v, want ErrEventStreamIdle", err)
	}
}
