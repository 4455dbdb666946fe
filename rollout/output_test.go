package rollout_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/rollout"
)

var sampleEvents = []rollout.Event{
	{Phase: rollout.PhaseRelays, App: "relay-a", Machine: "m1", Region: "ams", Status: rollout.StatusDraining, Message: "draining"},
	{Phase: rollout.PhaseRelays, App: "relay-a", Machine: "m1", Region: "ams", Status: rollout.StatusUpdating, Message: "updating"},
	{Phase: rollout.PhaseRelays, App: "relay-b", Machine: "m2", Region: "sea", Status: rollout.StatusWaiting, Message: "planned"},
	{Phase: rollout.PhaseRelays, App: "relay-a", Machine: "m1", Region: "ams", Status: rollout.StatusDone, Message: "boot b2"},
	{Phase: rollout.PhaseSmoke, Region: "ams", Status: rollout.StatusDone, Message: "smoke passed"},
}

// CI output: one plain line per event, nothing rewritten.
func TestPlainPrinter(t *testing.T) {
	var b bytes.Buffer
	p := rollout.PlainPrinter(&b)
	for _, ev := range sampleEvents {
		ev.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		p(ev)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(sampleEvents) || strings.Contains(b.String(), "\x1b") {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	if want := "2026-01-02T03:04:05Z relays   updating     relay-a/m1 (ams): updating"; lines[1] != want {
		t.Errorf("line %q, want %q", lines[1], want)
	}
}

// --json: one decodable event per line.
func TestJSONPrinter(t *testing.T) {
	var b bytes.Buffer
	p := rollout.JSONPrinter(&b)
	for _, ev := range sampleEvents {
		p(ev)
	}
	dec := json.NewDecoder(&b)
	for i := range sampleEvents {
		var ev rollout.Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Status != sampleEvents[i].Status || ev.Machine != sampleEvents[i].Machine {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
}

// Terminal output: one line per machine, rewritten in place.
func TestLivePrinter(t *testing.T) {
	var b bytes.Buffer
	p := rollout.NewLivePrinter(&b)
	for _, ev := range sampleEvents {
		p.Event(ev)
	}
	out := b.String()
	frames := strings.Split(out, "\x1b[")
	if !strings.Contains(out, "\x1b[2F") || len(frames) < 5 {
		t.Fatalf("no redraw:\n%q", out)
	}
	up := regexp.MustCompile(`\x1b\[\dF`).FindAllStringIndex(out, -1)
	last := out[up[len(up)-1][1]:]
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(last, "\x1b[2K", "")), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "relay-a m1 ams") || !strings.Contains(lines[0], "done") ||
		!strings.Contains(lines[1], "waiting") || !strings.Contains(lines[2], "smoke passed") {
		t.Errorf("last frame:\n%s", strings.Join(lines, "\n"))
	}
}

func TestWriteFleet(t *testing.T) {
	var b bytes.Buffer
	rollout.WriteFleet(&b, []rollout.MachineResult{{Role: "relay", App: "relay-a", Machine: "m1", Region: "ams", State: "stopped",
		Image: "purrfly:broken", Action: rollout.ActionFailed}, {Role: "relay", App: "relay-b", Machine: "m2", Region: "sea",
		State: "started", Image: "purrfly:v1", Boot: "b1", Action: rollout.ActionUntouched, InterruptedRooms: 2, InterruptedConnections: 3}})
	out := b.String()
	for _, want := range []string{"MACHINE", "purrfly:broken", "failed", "untouched", "2 rooms, 3 conns"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestWriteRetiring: the retiring table names each machine with its
// rooms, players and latest stop, and how it ended after --wait-retired;
// the fleet table names a replaced machine's replacement.
func TestWriteRetiring(t *testing.T) {
	var b bytes.Buffer
	by := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	rollout.WriteRetiring(&b, []rollout.RetiringMachine{
		{App: "relay-a", Machine: "m1", Region: "ams", State: "started", Rooms: 3, Players: 7, RetireBy: by},
		{App: "relay-b", Machine: "m2", Region: "sea", State: "destroyed", RetireBy: by, Retired: true},
		{App: "relay-b", Machine: "m3", Region: "sea", State: "destroyed", Rooms: 1, Players: 2, RetireBy: by, Retired: true, ClosedRooms: 1, ClosedPlayers: 2},
	})
	out := b.String()
	for _, want := range []string{"LATEST STOP", "relay-a   m1       ams     started    3      7        2026-12-01T14:00:00Z  -",
		"m2       sea     destroyed  0      0        2026-12-01T14:00:00Z  retired", "latest stop: closed 1 rooms, 2 players"} {
		if !strings.Contains(out, want) {
			t.Errorf("retiring table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	rollout.WriteFleet(&b, []rollout.MachineResult{{Role: "relay", App: "relay-a", Machine: "m1", Region: "ams", State: "started",
		Image: "purrfly:v2", Boot: "b2", Action: rollout.ActionReplaced, Replacement: "m9"}})
	// The row names the machine that runs that image and boot.
	if out := b.String(); !strings.Contains(out, "m9       ams     started  purrfly:v2  b2    replaces m1") {
		t.Errorf("fleet table of a replaced machine:\n%s", out)
	}
}

// TestLivePrinterDetails: the first frame draws without moving the cursor
// up and each later one moves up over exactly the lines it drew; events
// without a machine get a line per phase and region; a line in progress
// is marked "·"; messages up to 100 characters are shown whole, longer
// ones cut to 97 and "...".
func TestLivePrinterDetails(t *testing.T) {
	var b bytes.Buffer
	p := rollout.NewLivePrinter(&b)
	exact := strings.Repeat("x", 100)
	long := strings.Repeat("y", 101)
	p.Event(rollout.Event{Phase: rollout.PhaseSmoke, Region: "ams", Status: rollout.StatusWaiting, Message: exact})
	if first := b.String(); regexp.MustCompile(`\x1b\[\d+F`).MatchString(first) {
		t.Fatalf("the first frame moves the cursor up: %q", first)
	}
	if !strings.Contains(b.String(), "· ") || !strings.Contains(b.String(), exact) {
		t.Fatalf("first frame %q: want the in-progress mark and the whole 100-character message", b.String())
	}
	b.Reset()
	p.Event(rollout.Event{Phase: rollout.PhaseSmoke, Region: "sea", Status: rollout.StatusWaiting, Message: long})
	out := b.String()
	if !strings.HasPrefix(out, "\x1b[1F") {
		t.Fatalf("the second frame does not move up over the one line drawn: %q", out)
	}
	if !strings.Contains(out, strings.Repeat("y", 97)+"...") || strings.Contains(out, strings.Repeat("y", 98)) {
		t.Fatalf("a 101-character message was not cut to 97 and ...: %q", out)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("two regions of one phase drew %d lines, want 2: %q", n, out)
	}
}

// progressRun is a drain wait as the rollout reports it: the state event
// that starts it, then a progress event every poll (here 1 s) for 12 s,
// then the state event that ends it.
func progressRun(t0 time.Time) []rollout.Event {
	base := rollout.Event{Phase: rollout.PhaseRelays, App: "relay-a", Machine: "m1", Region: "ams", Status: rollout.StatusDraining}
	evs := []rollout.Event{base}
	evs[0].Time, evs[0].Message = t0, "draining boot b1: waiting up to 60s for its rooms to empty"
	for i := 1; i <= 12; i++ {
		ev := base
		ev.Time, ev.Wait, ev.Until = t0.Add(time.Duration(i)*time.Second), rollout.WaitDrain, t0.Add(60*time.Second)
		ev.Message = "waiting for the rooms of boot b1 to empty: 1 room(s), 2 connection(s) left"
		evs = append(evs, ev)
	}
	end := base
	end.Time, end.Message = t0.Add(12500*time.Millisecond), "drained"
	return append(evs, end, end) // the end twice: printed once
}

// TestPlainPrinterPacesProgress: in CI a wait shows what it waits for
// with a countdown every 5 s (by the events' times), not every poll; a
// switch to another wait shows at once; no line is printed twice.
func TestPlainPrinterPacesProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var b bytes.Buffer
	p := rollout.PlainPrinter(&b)
	for _, ev := range progressRun(t0) {
		p(ev)
	}
	lease := rollout.Event{Phase: rollout.PhaseRelays, App: "relay-b", Machine: "m2", Region: "sea", Status: rollout.StatusLeasing,
		Wait: rollout.WaitLease, Time: t0.Add(20 * time.Second), Until: t0.Add(30 * time.Second), Message: "waiting for the lease"}
	p(lease)
	lease.Wait, lease.Time, lease.Message = rollout.WaitTakeover, lease.Time.Add(time.Second), "waiting for it to expire"
	p(lease)
	want := []string{
		"2026-01-02T03:04:00Z relays   draining     relay-a/m1 (ams): draining boot b1: waiting up to 60s for its rooms to empty",
		"2026-01-02T03:04:05Z relays   draining     relay-a/m1 (ams): waiting for the rooms of boot b1 to empty: 1 room(s), 2 connection(s) left (55s left)",
		"2026-01-02T03:04:10Z relays   draining     relay-a/m1 (ams): waiting for the rooms of boot b1 to empty: 1 room(s), 2 connection(s) left (50s left)",
		"2026-01-02T03:04:12Z relays   draining     relay-a/m1 (ams): drained",
		"2026-01-02T03:04:20Z relays   leasing      relay-b/m2 (sea): waiting for the lease (10s left)",
		"2026-01-02T03:04:21Z relays   leasing      relay-b/m2 (sea): waiting for it to expire (9s left)",
	}
	if got := strings.Split(strings.TrimSpace(b.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestJSONPrinterPacesProgress: --json writes one event a line, progress
// paced as in CI, with what is waited for and until when.
func TestJSONPrinterPacesProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var b bytes.Buffer
	p := rollout.JSONPrinter(&b)
	for _, ev := range progressRun(t0) {
		p(ev)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), b.String())
	}
	var ev rollout.Event
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Wait != rollout.WaitDrain || !ev.Until.Equal(t0.Add(60*time.Second)) || !ev.Time.Equal(t0.Add(5*time.Second)) {
		t.Errorf("progress event %s decodes as %+v", lines[1], ev)
	}
	if strings.Contains(lines[0], `"until"`) || strings.Contains(lines[0], `"wait"`) {
		t.Errorf("a state event carries progress fields: %s", lines[0])
	}
}

// TestLivePrinterCountsDown: on a terminal the machine's line says what
// it waits for and counts down at every progress event; a long message
// is cut, never the countdown; an event that changes nothing draws
// nothing.
func TestLivePrinterCountsDown(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	var b bytes.Buffer
	p := rollout.NewLivePrinter(&b)
	ev := rollout.Event{Phase: rollout.PhaseRelays, App: "relay-a", Machine: "m1", Region: "ams", Status: rollout.StatusVerifying,
		Wait: rollout.WaitBoot, Time: t0, Until: t0.Add(90 * time.Second), Message: "waiting for a new boot"}
	p.Event(ev)
	if !strings.Contains(b.String(), "waiting for a new boot (1m30s left)") {
		t.Fatalf("no countdown: %q", b.String())
	}
	ev.Time = t0.Add(1500 * time.Millisecond)
	b.Reset()
	p.Event(ev)
	if !strings.HasPrefix(b.String(), "\x1b[1F\x1b[2K") || !strings.Contains(b.String(), "(1m29s left)") {
		t.Fatalf("the line was not rewritten with the time left: %q", b.String())
	}
	b.Reset()
	ev.Time = t0.Add(1600 * time.Millisecond)
	p.Event(ev)
	if b.Len() != 0 {
		t.Errorf("an unchanged line was drawn again: %q", b.String())
	}
	ev.Message = strings.Repeat("z", 120)
	p.Event(ev)
	if !strings.Contains(b.String(), "... (1m29s left)") {
		t.Errorf("a long message hides the countdown: %q", b.String())
	}
}

// TestChangesListedWhole: a plan's config changes are listed one a line
// and whole, however long, in CI logs and on a terminal (where the live
// lines are cut to fit): an edited key deep in a long diff is never cut
// off (once they were joined on one line, 2,000 characters long in a
// pipe and cut at the terminal's width on a terminal).
func TestChangesListedWhole(t *testing.T) {
	long := `services[0].checks: + [` + strings.Repeat(`{"interval":"10s","path":"/ping"},`, 10) + `]`
	ev := rollout.Event{Phase: rollout.PhasePlan, App: "relay-a", Machine: "m1", Region: "ams", Status: rollout.StatusWaiting,
		Message: "will update v1 -> v2, 3 config change(s):", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Changes: []string{`checks.ping.interval: - "2s"`, long, `env.GOMEMLIMIT: "420MiB" -> "430MiB"`}}
	var plain bytes.Buffer
	rollout.PlainPrinter(&plain)(ev)
	lines := strings.Split(strings.TrimSuffix(plain.String(), "\n"), "\n")
	if len(lines) != 4 || lines[2] != "    "+long || lines[3] != `    env.GOMEMLIMIT: "420MiB" -> "430MiB"` {
		t.Fatalf("plain output:\n%s", plain.String())
	}
	var live bytes.Buffer
	p := rollout.NewLivePrinter(&live)
	p.Event(rollout.Event{Phase: rollout.PhasePlan, App: "relay-b", Machine: "m2", Region: "sea", Status: rollout.StatusWaiting, Message: "planned"})
	live.Reset()
	p.Event(ev)
	out := live.String()
	if !strings.HasPrefix(out, "\x1b[1F\x1b[J") || !strings.Contains(out, "\n    "+long+"\n") ||
		!strings.Contains(out, "relay-a m1 ams: 3 config change(s)\n") {
		t.Fatalf("live output: %q", out)
	}
	// The live lines follow, both machines', and the next frame moves up
	// over those two only.
	_, frame, _ := strings.Cut(out, `"430MiB"`+"\n")
	if strings.Count(frame, "\x1b[2K") != 2 {
		t.Fatalf("frame after the changes: %q", frame)
	}
	live.Reset()
	p.Event(rollout.Event{Phase: rollout.PhasePlan, App: "relay-b", Machine: "m2", Region: "sea", Status: rollout.StatusDone, Message: "done"})
	if !strings.HasPrefix(live.String(), "\x1b[2F") {
		t.Fatalf("the next frame: %q", live.String())
	}
}
