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
func JSONPrinter(w io.Writer) func(Event) {
	enc := json.NewEncoder(w)
	var mu sync.Mutex
	return func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(ev)
	}
}

// PlainPrinter writes one line per event (CI logs, pipes).
func PlainPrinter(w io.Writer) func(Event) {
	var mu sync.Mutex
	return func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%s %-8s %-12s %s: %s\n", ev.Time.UTC().Format(time.RFC3339), ev.Phase, ev.Status, subject(ev), ev.Message)
	}
}

func subject(ev Event) string {
	switch {
	case ev.Machine != "":
		return fmt.Sprintf("%s/%s (%s)", ev.App, ev.Machine, ev.Region)
	case ev.Region != "":
		return string(ev.Phase) + " " + ev.Region
	default:
		return string(ev.Phase)
	}
}

// LivePrinter keeps one line per machine (and per phase) on a terminal and
// rewrites it in place as the machine goes waiting, leasing, draining,
// updating, verifying, done or failed.
type LivePrinter struct {
	w io.Writer

	mu    sync.Mutex // guards everything below
	keys  []string
	lines map[string]string
	drawn int
}

// NewLivePrinter returns a LivePrinter writing ANSI to w.
func NewLivePrinter(w io.Writer) *LivePrinter {
	return &LivePrinter{w: w, lines: map[string]string{}}
}

// Event updates the event's line and redraws.
func (p *LivePrinter) Event(ev Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := ev.App + "/" + ev.Machine
	if ev.Machine == "" {
		key = string(ev.Phase) + "/" + ev.Region
	}
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
	msg := ev.Message
	if len(msg) > 100 {
		msg = msg[:97] + "..."
	}
	p.lines[key] = fmt.Sprintf("%s %-40s %-12s %s", mark, name, ev.Status, msg)
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dF", p.drawn)
	}
	for _, k := range p.keys {
		b.WriteString("\x1b[2K")
		b.WriteString(p.lines[k])
		b.WriteByte('\n')
	}
	p.drawn = len(p.keys)
	_, _ = io.WriteString(p.w, b.String())
}

// WriteFleet prints which machine runs which image and boot.
func WriteFleet(w io.Writer, ms []MachineResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tAPP\tMACHINE\tREGION\tSTATE\tIMAGE\tBOOT\tACTION\tINTERRUPTED")
	for _, m := range ms {
		intr := "-"
		if m.InterruptedRooms > 0 {
			intr = fmt.Sprintf("%d rooms, %d conns", m.InterruptedRooms, m.InterruptedConnections)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Role, m.App, orDash(m.Machine), orDash(m.Region),
			orDash(m.State), orDash(m.Image), orDash(m.Boot), m.Action, intr)
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
