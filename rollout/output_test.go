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
