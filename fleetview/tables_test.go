package fleetview

import (
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

func TestTablesSayWhatTheAPISays(t *testing.T) {
	var b strings.Builder
	_ = WriteStats(&b, wire.Stats{Relays: 3, Draining: 1, Retiring: 1, Rooms: 3, Players: 7, Regions: []wire.RegionStats{{Region: "eu", Relays: 3, Draining: 1, Retiring: 1, Rooms: 3, Players: 7}}})
	if s := b.String(); !strings.Contains(s, "3 relay(s) (1 draining, 1 retiring), 3 room(s), 7 player(s)") || !strings.Contains(s, "eu      3       1         1         3      7") {
		t.Errorf("stats:\n%s", s)
	}
	b.Reset()
	_ = WriteInstances(&b, []wire.Instance{{BootID: "b1", Region: "eu", Status: "draining", Stale: true, Rooms: 1, Connections: 2, Labels: map[string]string{"tier": "pro"}},
		{BootID: "b2", MachineID: "m2", Region: "eu", Status: "retiring", Rooms: 4, Connections: 9, RetireBy: "2026-12-01T14:00:00Z"}})
	if s := b.String(); !strings.Contains(s, "draining (stale)") || !strings.Contains(s, "tier=pro") || !strings.Contains(s, " - ") ||
		!strings.Contains(s, "retiring (no new rooms") || !strings.Contains(s, "eu      m2       b2    4      9        2026-12-01T14:00:00Z") ||
		strings.Count(s, "b2") != 1 {
		t.Errorf("instances:\n%s", s)
	}
	b.Reset()
	_ = WriteRooms(&b, wire.RoomsResponse{Rooms: []wire.Room{{Name: "r1", Region: "us", BootID: "b2", Phase: "active", Connections: 4}}, Total: 9, Next: "r1"})
	if s := b.String(); !strings.Contains(s, "r1    us      b2     active  4") || !strings.Contains(s, "1 of 9 room(s) (more: --after r1)") {
		t.Errorf("rooms:\n%s", s)
	}
	line := EventLine(wire.Event{Type: wire.EventRoomCreate, At: "2026-12-01T00:00:00Z", Room: &wire.Room{Name: "r1", Region: "us", Phase: "waiting"}})
	if line != "2026-12-01T00:00:00.000Z room.create      room r1 (us) waiting: 0 player(s)" {
		t.Errorf("event line %q", line)
	}
	// Times of every precision print alike, so the columns line up.
	var widths []int
	for _, at := range []string{"2026-12-01T00:00:00Z", "2026-12-01T00:00:00.5Z", "2026-12-01T00:00:00.123456789Z"} {
		line := EventLine(wire.Event{Type: wire.EventStats, At: at, Stats: &wire.Stats{}})
		widths = append(widths, strings.Index(line, "stats"))
	}
	if widths[0] != widths[1] || widths[1] != widths[2] {
		t.Errorf("event type columns start at %v, want one column", widths)
	}
}
