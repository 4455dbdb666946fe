package flysim

import (
	"bytes"
	"maps"
	"net/http"
)

// answer is a Machines API handler's response, built in memory and sent
// after the handler returns (see routes): a handler may hold Sim.mu while
// it writes, and the network write happens after the lock is released.
// Owned by the request's goroutine.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newAnswer() *answer { return &answer{header: http.Header{}} }

func (a *answer) Header() http.Header { return a.header }

func (a *answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answer) Write(p []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(p)
}

// send writes the answer to w.
func (a *answer) send(w http.ResponseWriter) {
	maps.Copy(w.Header(), a.header)
	if a.status == 0 {
		a.status = http.StatusOK
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body.Bytes())
}
