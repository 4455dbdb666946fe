package balancer

import (
	"net/http"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// sseWriteTimeout bounds one write of an event stream (a consumer that
// stops reading is closed then).
const sseWriteTimeout = 10 * time.Second

// handleEvents is GET /v1/events: a text/event-stream of wire.Event
// frames ("id:", "event:", "data:"), a stats event first, and a ": ping"
// comment every Options.EventPing (on the injected clock). No
// replay (Last-Event-ID is ignored): a consumer that reconnects re-reads
// /v1/stats, /v1/instances and /v1/rooms. At most Options.MaxEventStreams
// at once (429 too_many_streams); a stream that falls eventBuffer events
// behind is closed. Each stream opened is logged once, with its key's
// fingerprint: a reader that only reads is otherwise never named.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.events.subscribe()
	if err != nil {
		return err
	}
	defer s.events.unsubscribe(sub)
	c := streamCaller(r)
	s.log.Info("admin event stream opened", "route", wire.PathEvents, "key", string(c.cred), "source", c.source)
	rc := http.NewResponseController(w)
	// The stream outlives the server's read and write timeouts: no read
	// deadline (nothing more is read), a write deadline per write.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout)) // wall clock: a socket deadline
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.WriteHeader(http.StatusOK)
	ping := s.clock.NewTicker(s.opts.EventPing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-sub.done:
			// Dropped (behind) or shutting down; drain what was queued.
			for {
				select {
				case b := <-sub.ch:
					sub.queued.Add(-int64(len(b)))
					if !write(b) {
						return nil
					}
				default:
					return nil
				}
			}
		case b := <-sub.ch:
			sub.queued.Add(-int64(len(b)))
			if !write(b) {
				return nil
			}
		case <-ping.C():
			if !write([]byte(": ping\n\n")) {
				return nil
			}
		}
	}
}

// handleHealthz is GET /healthz (no auth): the process serves HTTP.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) error {
	wire.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// handleReadyz is GET /readyz (no auth): 200 until Shutdown begins, then
// 503 draining.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) error {
	if s.draining.Load() {
		return wire.ErrDraining
	}
	wire.WriteJSON(w, http.StatusOK, map[string]bool{"ready": true})
	return nil
}
