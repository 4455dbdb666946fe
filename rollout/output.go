package rollout

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// JSONPrinter writes one JSON event per line (for tools: `--json`).
// Progress events are paced as PlainPrinter paces them.
func JSONPrinter(w io.Writer) func(Event) {
	enc := json.NewEncoder(w)
	var mu sync.Mutex // guards enc and pace
	var pace pacer
	return func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		if pace.admit(ev, plainText(ev)) {
			_ = enc.Encode(ev)
		}
	}
}

// PlainPrinter writes one line per event (CI logs, pipes): every state
// event (never one repeating its machine's line before), and a wait's
// progress with its countdown every ProgressEvery, not every poll.
func PlainPrinter(w io.Writer) func(Event) {
	var mu sync.Mutex // guards w and pace
	var pace pacer
	return func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		if text := plainText(ev); pace.admit(ev, text) {
			fmt.Fprintf(w, "%s %s\n%s", ev.Time.UTC().Format(time.RFC3339), text, changeLines(ev.Changes))
		}
	}
}

// plainText is a plain line but its time.
func plainText(ev Event) string {
	return fmt.Sprintf("%-8s %-12s %s: %s%s", ev.Phase, ev.Status, subject(ev), ev.Message, countdown(ev))
}

func subject(ev Event) string {
	switch {
	case ev.Machine != "":
		return fmt.Sprintf("%s/%s (%s)", ev.App, ev.Machine, ev.Region)
	case ev.App != "":
		return fmt.Sprintf("%s (%s)", ev.App, ev.Region)
	case ev.Region != "":
		return string(ev.Phase) + " " + ev.Region
	default:
		return string(ev.Phase)
	}
}

// changeLines lists a plan's config changes one a line, indented under
// the machine's line and whole, however long: an operator reads every
// field an update would change before saying yes to it.
func changeLines(changes []string) string {
	var b strings.Builder
	for _, c := range changes {
		b.WriteString("    ")
		b.WriteString(c)
		b.WriteByte('\n')
	}
	return b.String()
}

// LivePrinter keeps one line per machine (and per phase) on a terminal and
// rewrites it in place as the machine goes waiting, leasing, draining,
// updating, verifying, done or failed; while it waits, the line says for
// what and counts down, at every progress event.
type LivePrinter struct {
	w io.Writer // static

	mu    sync.Mutex // guards everything below
	keys  []string
	lines map[string]string
	drawn int
	frame string // the last frame written
}

// NewLivePrinter returns a LivePrinter writing ANSI to w.
func NewLivePrinter(w io.Writer) *LivePrinter {
	return &LivePrinter{w: w, lines: map[string]string{}}
}

// Event updates the event's line and redraws.
func (p *LivePrinter) Event(ev Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := lineKey(ev)
	if _, ok := p.lines[key]; !ok {
		p.keys = append(p.keys, key)
	}
	mark := map[Status]string{StatusDone: "✓", StatusFailed: "✗", StatusRolledBack: "↺"}[ev.Status]
	if mark == "" {
		mark = "·"
	}
	name := subject(ev)
	if ev.Machine != "" {
		name = fmt.Sprintf("%s %s %s", ev.App, ev.Machine, ev.Region)
	}
	// The countdown is never cut off: the message makes room for it.
	left := countdown(ev)
	msg := ev.Message
	if n := 100 - len(left); len(msg) > n {
		msg = msg[:n-3] + "..."
	}
	p.lines[key] = fmt.Sprintf("%s %-40s %-12s %s%s", mark, name, ev.Status, msg, left)
	var b strings.Builder
	if len(ev.Changes) > 0 {
		// A plan's changes are printed once, whole, above the live lines:
		// the live lines are cut to fit a terminal's width and rewritten,
		// and a change cut short could hide the very field an operator
		// edited. Moving up over the frame and clearing to the end makes
		// room; the frame is then drawn again below them.
		if p.drawn > 0 {
			fmt.Fprintf(&b, "\x1b[%dF", p.drawn)
		}
		b.WriteString("\x1b[J")
		fmt.Fprintf(&b, "%s: %d config change(s)\n%s", name, len(ev.Changes), changeLines(ev.Changes))
		p.drawn, p.frame = 0, ""
	}
	above := b.String()
	b.Reset()
	for _, k := range p.keys {
		b.WriteString("\x1b[2K")
		b.WriteString(p.lines[k])
		b.WriteByte('\n')
	}
	frame := b.String()
	if frame == p.frame {
		return // nothing changed: nothing is drawn twice
	}
	if p.drawn > 0 {
		frame = fmt.Sprintf("\x1b[%dF", p.drawn) + frame
	}
	p.frame, p.drawn = b.String(), len(p.keys)
	_, _ = io.WriteString(p.w, above+frame)
}

// WriteFleet prints which machine runs which image and boot. A relay
// replaced by overlap is listed as its replacement, which runs that image
// and boot, with the machine it replaces in ACTION.
func WriteFleet(w io.Writer, ms []MachineResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tAPP\tMACHINE\tREGION\tSTATE\tIMAGE\tBOOT\tACTION\tINTERRUPTED")
	for _, m := range ms {
		intr := "-"
		if m.InterruptedRooms > 0 {
			intr = fmt.Sprintf("%d rooms, %d conns", m.InterruptedRooms, m.InterruptedConnections)
		}
		action, machine := string(m.Action), m.Machine
		if m.Replacement != "" {
			// Image and boot are the replacement's; this machine retires.
			action, machine = "replaces "+m.Machine, m.Replacement
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Role, m.App, orDash(machine), orDash(m.Region),
			orDash(m.State), orDash(m.Image), orDash(m.Boot), action, intr)
	}
	_ = tw.Flush()
}

// WriteRetiring prints the relay machines retiring, app by app: their
// rooms and players and when they stop at the latest (or how they ended,
// after --wait-retired).
func WriteRetiring(w io.Writer, rs []RetiringMachine) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RETIRING\tMACHINE\tREGION\tSTATE\tROOMS\tPLAYERS\tLATEST STOP\tENDED")
	for _, rm := range rs {
		ended := "-"
		switch {
		case rm.Retired && rm.ClosedRooms+rm.ClosedPlayers > 0:
			ended = fmt.Sprintf("latest stop: closed %d rooms, %d players", rm.ClosedRooms, rm.ClosedPlayers)
		case rm.Retired:
			ended = "retired"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", rm.App, rm.Machine, orDash(rm.Region), orDash(rm.State),
			rm.Rooms, rm.Players, stopText(rm.RetireBy), ended)
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
