package fleetview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/purrfly/purrfly/wire"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteStats writes the fleet's totals and one line per region.
func WriteStats(w io.Writer, st wire.Stats) error {
	fmt.Fprintf(w, "%d relay(s) (%d draining, %d retiring), %d room(s), %d player(s)\n\n", st.Relays, st.Draining, st.Retiring, st.Rooms, st.Players)
	tw := table(w)
	fmt.Fprintln(tw, "REGION\tRELAYS\tDRAINING\tRETIRING\tROOMS\tPLAYERS")
	for _, r := range st.Regions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", r.Region, r.Relays, r.Draining, r.Retiring, r.Rooms, r.Players)
	}
	return tw.Flush()
}

// WriteInstances writes one line per relay, the retiring ones (replaced
// by a deploy, stopping when their last game ends) in a table of their
// own with their latest stop.
func WriteInstances(w io.Writer, list []wire.Instance) error {
	tw := table(w)
	fmt.Fprintln(tw, "REGION\tMACHINE\tBOOT\tSTATUS\tROOMS\tPLAYERS\tIMAGE\tLABELS")
	var retiring []wire.Instance
	for _, in := range list {
		if in.Status == wire.InstanceRetiring {
			retiring = append(retiring, in)
			continue
		}
		status := in.Status
		if in.Stale {
			status += " (stale)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", in.Region, dash(in.MachineID), in.BootID, status,
			in.Rooms, in.Connections, dash(in.Image), dash(wire.FormatLabels(in.Labels, '=')))
	}
	if err := tw.Flush(); err != nil || len(retiring) == 0 {
		return err
	}
	fmt.Fprintln(w, "\nretiring (no new rooms; each stops when its last game ends, at its latest stop at the latest):")
	tw = table(w)
	fmt.Fprintln(tw, "REGION\tMACHINE\tBOOT\tROOMS\tPLAYERS\tLATEST STOP\tIMAGE")
	for _, in := range retiring {
		stale := ""
		if in.Stale {
			stale = " (stale)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%d\t%d\t%s\t%s\n", in.Region, dash(in.MachineID), in.BootID, stale,
			in.Rooms, in.Connections, dash(in.RetireBy), dash(in.Image))
	}
	return tw.Flush()
}

// WriteRooms writes one line per room, then how many matched.
func WriteRooms(w io.Writer, res wire.RoomsResponse) error {
	tw := table(w)
	fmt.Fprintln(tw, "NAME\tREGION\tRELAY\tPHASE\tPLAYERS")
	for _, r := range res.Rooms {
		relay := r.MachineID
		if relay == "" {
			relay = r.BootID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.Name, r.Region, relay, r.Phase, r.Connections)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more := ""
	if res.Next != "" {
		more = fmt.Sprintf(" (more: --after %s)", res.Next)
	}
	_, err := fmt.Fprintf(w, "%d of %d room(s)%s\n", len(res.Rooms), res.Total, more)
	return err
}

// EventLine is one event of GET /v1/events as a line.
func EventLine(ev wire.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-16s", eventTime(ev.At), ev.Type)
	switch {
	case ev.Instance != nil:
		in := ev.Instance
		fmt.Fprintf(&b, " relay %s (%s, %s) %s: %d room(s), %d player(s)", in.BootID, in.Region, dash(in.MachineID), in.Status, in.Rooms, in.Connections)
		if in.RetireBy != "" {
			fmt.Fprintf(&b, ", stops by %s at the latest", in.RetireBy)
		}
	case ev.Room != nil:
		r := ev.Room
		fmt.Fprintf(&b, " room %s (%s) %s: %d player(s)", r.Name, r.Region, r.Phase, r.Connections)
	case ev.Stats != nil:
		st := ev.Stats
		fmt.Fprintf(&b, " %d relay(s) (%d draining, %d retiring), %d room(s), %d player(s)", st.Relays, st.Draining, st.Retiring, st.Rooms, st.Players)
	}
	return b.String()
}

// eventTimeLayout prints an event's time with milliseconds always, so the
// columns of `fleet watch` line up (the API drops trailing zeros).
const eventTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// eventTime is an event's RFC 3339 time in eventTimeLayout, or the text
// as it came when it is not one ("-" when empty).
func eventTime(at string) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return dash(at)
	}
	return t.Format(eventTimeLayout)
}
