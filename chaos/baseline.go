package chaos

import (
	"context"
	"os"
	"runtime"
	"sort"
	"time"
)

// BaselineRow is one process group's goroutines and open file descriptors
// before the storm and after it (rooms closed, faults healed, machines
// started again): an app (summed over its started machines, from their
// go_goroutines and process_open_fds) or the soak's own process.
type BaselineRow struct {
	Process          string  `json:"process"`
	GoroutinesBefore float64 `json:"goroutines_before"`
	GoroutinesAfter  float64 `json:"goroutines_after"`
	FDsBefore        float64 `json:"fds_before"`
	FDsAfter         float64 `json:"fds_after"`
}

// selfProcess names the soak's own row.
const selfProcess = "purrctl chaos (this process)"

// within is the tolerance of "back to baseline": a few goroutines and fds
// come and go with keep-alive connections and timers.
func within(after, before float64) bool { return after <= before+max(12, before/5) }

func (r BaselineRow) ok() bool {
	return within(r.GoroutinesAfter, r.GoroutinesBefore) && within(r.FDsAfter, r.FDsBefore)
}

// measure reads the figures of every app and of this process.
func (f *fleet) measure(ctx context.Context) (map[string][2]float64, error) {
	out := map[string][2]float64{}
	apps := append([]string{f.balancer}, f.relays...)
	for _, a := range apps {
		ms, err := f.started(ctx, a)
		if err != nil {
			return nil, err
		}
		var g, fd float64
		for _, m := range ms {
			body, err := f.private(ctx, m, "/metrics", nil)
			if err != nil {
				return nil, err
			}
			gv, ok1 := metric(body, "go_goroutines")
			fv, ok2 := metric(body, "process_open_fds")
			if !ok1 || !ok2 {
				return nil, errNoProcessMetrics
			}
			g, fd = g+gv, fd+fv
		}
		out[a] = [2]float64{g, fd}
	}
	out[selfProcess] = [2]float64{float64(runtime.NumGoroutine()), float64(openFDs())}
	return out, nil
}

// collect runs a garbage collection (twice, so the finalizers queued by the
// first have run) and returns how many of this process's descriptors it
// closed: sockets and files dropped without Close, which hold their
// descriptor until their finalizer runs. They are reported
// (fds_closed_by_gc), not counted as a leak: nothing references them.
func collect() int {
	before := openFDs()
	runtime.GC()
	runtime.GC()
	return before - openFDs()
}

var errNoProcessMetrics = errorString("a machine's /metrics lacks go_goroutines or process_open_fds")

type errorString string

func (e errorString) Error() string { return string(e) }

// openFDs counts this process's open descriptors (Linux; -1 elsewhere).
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// settle measures again until every row is back within tolerance of
// before, or timeout passes; it returns the last rows.
func (f *fleet) settle(ctx context.Context, before map[string][2]float64, timeout time.Duration, idle func(), gcClosed func(int)) []BaselineRow {
	deadline := time.Now().Add(timeout)
	var rows []BaselineRow
	for {
		idle()
		gcClosed(collect())
		after, err := f.measure(ctx)
		rows = rows[:0]
		all := err == nil
		if err == nil {
			for name, b := range before {
				a := after[name]
				row := BaselineRow{Process: name, GoroutinesBefore: b[0], GoroutinesAfter: a[0], FDsBefore: b[1], FDsAfter: a[1]}
				rows = append(rows, row)
				all = all && row.ok()
			}
		}
		if (all || time.Now().After(deadline) || ctx.Err() != nil) && len(rows) > 0 {
			sort.Slice(rows, func(i, j int) bool { return rows[i].Process < rows[j].Process })
			return rows
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		pause(ctx, 500*time.Millisecond)
	}
}
