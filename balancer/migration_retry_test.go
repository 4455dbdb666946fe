package balancer

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// A migration change whose relay call timed out or lost its answer is a
// retryable 503 migration_outcome_indeterminate for the caller: also
// when its connection breaks after the request was written and a retry
// could not even dial (the transport never retries a migration call by
// itself, so the written attempt is never forgotten).
func TestMigrationWrittenThenRetryDialFailsIsIndeterminate(t *testing.T) {
	h := newHarness(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var received atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		// First request: a proper keep-alive answer, so the connection is reused.
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		body := `{"roomName":"x"}`
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		// Second request (the claim): read it (the relay "commits"), then
		// the machine becomes unreachable: no new connections, and this one
		// drops before the answer.
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		received.Add(1)
		ln.Close()
	}()
	rec := &roomRecord{relay: &relayEntry{info: wire.RelayInfo{Endpoint: "http://" + ln.Addr().String(), BootID: "boot", Host: "relay.test"}},
		epoch: "e", revision: 1}
	// Warm the connection with a read.
	_, _ = h.s.migrateOn(context.Background(), rec, wire.MigrationRequest{Op: wire.OpCurrent, Name: "x", Secret: "s"})
	req := wire.MigrationRequest{Op: wire.OpClaim, Name: "x", Secret: "s", ClaimID: "c1", Incarnation: "i",
		ExpectedGeneration: 0, PromotedPlayerID: "7"}
	_, err = h.s.migrateOn(context.Background(), rec, req)
	<-done
	if received.Load() != 1 {
		t.Fatalf("the relay did not receive the claim (test setup)")
	}
	var we *wire.Error
	if e, ok := err.(*wire.Error); ok {
		we = e
	}
	if we == nil || we.Code != wire.ErrMigrationIndeterminate.Code {
		t.Fatalf("a claim the relay received and never answered: %v, want 503 migration_outcome_indeterminate", err)
	}
}
