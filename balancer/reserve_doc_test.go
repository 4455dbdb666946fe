package balancer

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// reserveErrors are the answers POST /v1/rooms can fail with: the guards
// every request passes (wire.Common, the standby gate, v1), the body's
// checks, Allocate and its placement, the relay call.
var reserveErrors = []*wire.Error{
	wire.ErrIndeterminate, wire.ErrRelayFailed, wire.ErrRelayBadAnswer, wire.ErrInstanceBusy,
	wire.ErrAllocationBusy, wire.ErrBalancerSettling, wire.ErrBalancerFull, wire.ErrBalancerStandby,
	wire.ErrNoCandidate, wire.ErrInstanceDraining, wire.ErrInstanceNotFound, wire.ErrRoomTaken,
	wire.ErrInvalidRoomName, wire.ErrBadRequest, wire.ErrBodyTooLarge, wire.ErrUnauthorized,
	wire.ErrThrottled, wire.ErrHeaderTooLarge, wire.ErrBadPath, wire.ErrInternal,
}

// TestReserveErrorsAsDocumented: README's table of POST /v1/rooms's
// failures lists each of them once with the status and retryable flag
// the code answers, and nothing else, so a matchmaker's retry rule read
// there holds.
func TestReserveErrorsAsDocumented(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n### Reserving a room: failures and retries\n")
	if start < 0 {
		t.Fatal("README has no section \"Reserving a room: failures and retries\"")
	}
	doc = doc[start+1:]
	if end := strings.Index(doc, "\n## "); end >= 0 {
		doc = doc[:end]
	}
	row := regexp.MustCompile("(?m)^\\| (`[a-z_]+`(?:, `[a-z_]+`)*) \\| ([0-9, ]+) \\| (yes|no) \\|")
	documented := map[string]string{} // code -> "503 true"
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		codes := strings.Split(strings.ReplaceAll(m[1], "`", ""), ", ")
		statuses := strings.Split(m[2], ", ")
		if len(codes) != len(statuses) {
			t.Fatalf("row %q: %d codes, %d statuses", m[0], len(codes), len(statuses))
		}
		for i, c := range codes {
			if _, twice := documented[c]; twice {
				t.Errorf("%s is documented twice", c)
			}
			documented[c] = statuses[i] + " " + strconv.FormatBool(m[3] == "yes")
		}
	}
	for _, e := range reserveErrors {
		want := strconv.Itoa(e.Status) + " " + strconv.FormatBool(e.Retryable)
		if got, ok := documented[e.Code]; !ok {
			t.Errorf("%s (%s) is not in the table", e.Code, want)
		} else if got != want {
			t.Errorf("%s is documented as %s, the code answers %s", e.Code, got, want)
		}
		delete(documented, e.Code)
	}
	for c := range documented {
		t.Errorf("the table lists %s, which POST /v1/rooms does not answer", c)
	}
}
