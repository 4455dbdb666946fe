package rollout

import (
	"fmt"
	"time"
)

// ProgressEvery is how often an output that cannot rewrite a line (a CI
// log, a pipe, --json) repeats the progress of one machine's wait.
const ProgressEvery = 5 * time.Second

// pacer decides which events a line-by-line printer writes: every state
// event, unless it would repeat its machine's previous line; of progress
// events, one when the wait changes from one progress wait to another,
// else one every ProgressEvery after the machine's previous line (the
// state event before a wait already says what it waits for). It reads
// no clock: it compares the events' own Times, so it is as deterministic
// as the events it is given. Not safe for concurrent use; each printer
// guards its own.
type pacer struct {
	last map[string]pacedLine // by lineKey
}

type pacedLine struct {
	at   time.Time // the event's Time
	wait string    // its Wait ("" for a state event)
	text string    // what was printed, but the time
}

// admit reports whether ev, printed as text, is to be written, and if so
// remembers it.
func (p *pacer) admit(ev Event, text string) bool {
	if p.last == nil {
		p.last = map[string]pacedLine{}
	}
	key := lineKey(ev)
	l, seen := p.last[key]
	switch {
	case seen && text == l.text:
		return false
	case ev.Wait != "" && seen && ev.Time.Sub(l.at) < ProgressEvery && (l.wait == "" || l.wait == ev.Wait):
		return false
	}
	p.last[key] = pacedLine{at: ev.Time, wait: ev.Wait, text: text}
	return true
}

// lineKey names the line an event belongs to: its machine, else its
// phase and region.
func lineKey(ev Event) string {
	if ev.Machine == "" {
		return string(ev.Phase) + "/" + ev.App + "/" + ev.Region
	}
	return ev.App + "/" + ev.Machine
}

// countdown is " (42s left)" for a progress event with an Until: Until
// minus the event's Time, in whole seconds rounded up; else "".
func countdown(ev Event) string {
	if ev.Wait == "" || ev.Until.IsZero() {
		return ""
	}
	left := (max(ev.Until.Sub(ev.Time), 0) + time.Second - 1).Truncate(time.Second)
	return fmt.Sprintf(" (%s left)", left)
}
