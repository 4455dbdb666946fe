package balancer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// The chart's history keeps the last hour, oldest first, in a fixed ring.
func TestStatsHistoryKeepsTheLastHour(t *testing.T) {
	var h statsHistory
	if got := h.samples(); len(got) != 0 {
		t.Fatalf("empty history: %v", got)
	}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < historyLen+10; i++ {
		h.record(start.Add(time.Duration(i)*historyEvery), wire.Stats{Rooms: int64(i), Players: int64(2 * i), Relays: 1})
	}
	got := h.samples()
	if len(got) != historyLen || got[0].Rooms != 10 || got[len(got)-1].Rooms != historyLen+9 || got[0].Players != 20 {
		t.Fatalf("history: %d samples, first %+v, last %+v", len(got), got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i].At <= got[i-1].At {
			t.Fatalf("out of order at %d: %s after %s", i, got[i].At, got[i-1].At)
		}
	}
}

// GET /v1/stats/history answers the samples behind the admin key.
func TestV1StatsHistoryRoute(t *testing.T) {
	h, _ := adminHarness(t, nil, nil)
	st, body, _ := h.do("GET", wire.PathStatsHistory, nil, nil)
	wantErrBody(t, st, body, 401, wire.ErrUnauthorized.Code)
	waitFor(t, "the first sample", func() bool {
		st, body, _ := h.do("GET", wire.PathStatsHistory, bearer(adminKeyA), nil)
		var hist wire.StatsHistory
		return st == 200 && json.Unmarshal(body, &hist) == nil && hist.IntervalSeconds == 60 && len(hist.Samples) >= 1
	})
}
