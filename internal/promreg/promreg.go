// Package promreg makes the Prometheus registry a purrfly server serves at
// /metrics when its caller gives none: the server's own metrics plus the
// Go runtime's (go_goroutines, go_memstats_*) and the process's
// (process_open_fds, process_resident_memory_bytes, ...), which operators
// and the soaks (bench's connection soak, chaos) read to see that nothing
// leaks.
package promreg

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// New returns a fresh registry holding the Go and process collectors.
func New() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
