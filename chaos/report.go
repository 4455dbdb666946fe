package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a soak's figures: what was injected, what was played, every
// invariant's violations (0 is the goal) and the baseline rows.
type Report struct {
	Seed       uint64            `json:"seed"`
	Planned    string            `json:"planned_duration"`
	Elapsed    string            `json:"elapsed"`
	Faults     map[string]int    `json:"faults"`
	Counts     map[string]int64  `json:"counts"`
	Worst      map[string]string `json:"worst"`
	Bounds     map[string]string `json:"bounds"`
	Violations map[string]int    `json:"violations"`
	Details    []Violation       `json:"violation_details,omitempty"`
	Baseline   []BaselineRow     `json:"baseline"`
	LogFiles   int               `json:"log_files_scanned"`
	LogLines   int               `json:"log_lines_scanned"`
}

// Total is the number of violations of every invariant.
func (r *Report) Total() int {
	n := 0
	for _, v := range r.Violations {
		n += v
	}
	return n
}

// WriteTable prints the report for a terminal.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "chaos soak\tseed %d\tplanned %s\telapsed %s\n\n", r.Seed, r.Planned, r.Elapsed)
	fmt.Fprintln(tw, "FAULT\tINJECTED")
	total := 0
	for _, k := range append(FaultKinds, FaultRival) {
		if n, ok := r.Faults[k]; ok || k != FaultRival {
			fmt.Fprintf(tw, "%s\t%d\n", k, n)
			total += n
		}
	}
	fmt.Fprintf(tw, "total\t%d\n\n", total)
	fmt.Fprintln(tw, "INVARIANT\tVIOLATIONS")
	for _, k := range Invariants {
		fmt.Fprintf(tw, "%s\t%d\n", k, r.Violations[k])
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "COUNT\tVALUE")
	for _, k := range sortedKeys(r.Counts) {
		fmt.Fprintf(tw, "%s\t%d\n", k, r.Counts[k])
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "WORST CASE\tOBSERVED\tBOUND")
	for _, k := range sortedKeys(r.Worst) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k, r.Worst[k], r.Bounds[k])
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "PROCESS\tGOROUTINES BEFORE\tAFTER\tFDS BEFORE\tAFTER")
	for _, b := range r.Baseline {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\n", b.Process, b.GoroutinesBefore, b.GoroutinesAfter, b.FDsBefore, b.FDsAfter)
	}
	fmt.Fprintf(tw, "\nlogs scanned for secrets: %d files, %d lines\n", r.LogFiles, r.LogLines)
	for _, v := range r.Details {
		fmt.Fprintf(tw, "VIOLATION %s\t%s\t%s\t%s\n", v.At.Format(time.TimeOnly), v.Invariant, v.Room, strings.ReplaceAll(v.Detail, "\t", " "))
	}
	_ = tw.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// InterruptedError is Run's answer when its context ended during the
// storm (Ctrl-C): the fleet was neither healed nor settled, so no
// invariant was judged.
type InterruptedError struct {
	Seed    uint64
	Elapsed time.Duration
	Faults  int
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("the chaos soak stopped after %s and %d fault(s), before its invariants were judged (seed %d)",
		e.Elapsed.Round(time.Second), e.Faults, e.Seed)
}
