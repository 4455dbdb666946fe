package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// The room follows its host (wire.PathHandover). This file is the asking
// side; handover_give.go is the holder's.
//
// PurrNet's own client connects without a session hint, so Fly's proxy
// puts a host on any machine of the app, usually not the one the balancer
// created its room on. Forwarding the host would tie the game to two
// machines: stopping either (a scale-down, a deploy) would end it. So when
// the first message of a connection names a room another machine of the
// app holds and nobody is in (the balancer's location carries the count),
// the edge first asks that holder to hand the room over. The holder agrees
// only for the room's host secret while the room still awaits its
// allocation's host (the core's HandOver: generation 0, nobody connected).
// It ends its incarnation (the removal goes to its outbox) and answers the
// credentials; the edge creates a new incarnation with them, publishes it
// naming the old one (Publication.MovedFrom, a compare-and-set at the
// balancer) and then serves the host directly.
//
// Every other answer (a client's secret, a room in use or hosted once, a
// holder that predates handovers, a failure) leaves the room where it is
// and the connection is forwarded as before. A host is therefore still
// forwarded when clients were in its room first, when it comes back to a
// vacant room, when the edge is draining, when the balancer does not
// support handovers (wire.RegisterResponse.Handover), when the holder
// belongs to another app, or when the holder cannot be asked.
//
// Failures. The holder gives a room up before its answer travels: if the
// answer is lost, the asker asks again (once, on a transport error) and
// the holder answers the same asker the same credentials for a while
// (handover_give.go), so the room is not lost between the two machines. If
// the balancer refuses the moved publication (another incarnation of the
// name won meanwhile: an allocation replay, a takeover), the adopted room
// ends here, whoever is in it (the host gets [4], or 1012 if the refusal
// only comes with a later publication of the registrar), so a room the
// balancer does not route to is not kept alive on a second machine. Two
// narrow windows remain, both before the host is in: a client that
// arrives between the old holder's answer and the publication, or through
// a machine that looked the room up in the second before (its cache),
// reaches the old holder and gets [4], as for a room that just ended.

// maxHandoverAnswer bounds the holder's answer.
const maxHandoverAnswer = 16 << 10

// handoverAttemptTimeout bounds one handover request (its own budget, not
// what the room lookup left of ForwardTimeout); handoverAttempts is how
// many are made when the answer is lost in transport; handoverPublishTimeout
// bounds the publication of the adopted room. Together they keep the
// handover within about 5 s; with the room lookup before it (at most 2 s)
// a host waits at most about 7 s for its authentication answer.
const (
	handoverAttemptTimeout = 1500 * time.Millisecond
	handoverAttempts       = 2
	handoverPublishTimeout = 2 * time.Second
)

// claim asks the holder at loc to hand room a.RoomName over to this
// machine, and creates it here when it agrees. It reports whether the
// room's connection is to be served here (the core then answers as usual).
// Only empty rooms on machines of this app (same public host and port) are
// asked for, a draining or retiring machine asks for none (it takes no new rooms), and
// nobody asks unless the balancer said it applies moved publications.
func (m *mesh) claim(ctx context.Context, loc wire.RoomLocation, a wire.Auth) bool {
	if loc.Connections > 0 || !m.sameApp(loc) || m.core.TakesNoRooms() || m.reg == nil || !m.reg.handover.Load() {
		return false
	}
	start := m.clock.Now()
	var h wire.HandoverResponse
	var err error
	for range handoverAttempts {
		if h, err = m.askHandover(ctx, loc, a); !errors.Is(err, errHandoverTransport) {
			break
		}
	}
	switch {
	case errors.Is(err, wire.ErrHandoverRefused), errors.Is(err, wire.ErrNotFound):
		// Declined, or a holder that predates handovers.
		m.m.handovers.WithLabelValues("refused").Inc()
		return false
	case err != nil:
		m.m.handovers.WithLabelValues("error").Inc()
		m.log.Warn("failed to ask for a room's handover", "room", a.RoomName, "holder", loc.MachineID, "err", err)
		return false
	}
	r := m.core.Adopt(h, wire.Incarnation{BootID: loc.BootID, Epoch: h.From.Epoch})
	if r == nil {
		// A room of that name appeared here meanwhile; the core decides.
		m.m.handovers.WithLabelValues("raced").Inc()
		return true
	}
	// The balancer learns of the move before the host is served (and so
	// before anyone the host invites can look the room up). A network
	// failure here is repaired by the registrar's own publication of the
	// room; a refusal means another incarnation owns the name.
	pctx, cancel := context.WithTimeout(ctx, min(m.requestTimeout, handoverPublishTimeout))
	st, err := m.reg.publishNow(pctx, r)
	cancel()
	switch {
	case err == nil && (st == wire.PubConflict || st == wire.PubFenced):
		m.m.handovers.WithLabelValues("superseded").Inc()
		m.log.Warn("the balancer refused a handed-over room; ending it here", "room", a.RoomName, "status", st)
		m.core.EndRoom(r, core.ReasonRoomGone)
		return true
	case err == nil && (st == wire.PubApplied || st == wire.PubCurrent):
		// Routed here (current: the registrar's own publication of it got
		// there first).
	default:
		// No verdict (a network failure, a registration being renewed):
		// the registrar publishes the room again, and ends it if the
		// balancer then refuses it (registrar.refused).
		m.log.Warn("failed to publish a handed-over room at once", "room", a.RoomName, "status", st, "err", err)
	}
	m.m.handovers.WithLabelValues("ok").Inc()
	m.log.Info("room handed over to its host's machine", "room", a.RoomName,
		"from_machine", loc.MachineID, "from_epoch", h.From.Epoch, "took", m.clock.Now().Sub(start).Round(time.Microsecond).String())
	return true
}

// errHandoverTransport marks a handover request whose answer did not
// arrive (the holder may have given the room up): worth asking again.
var errHandoverTransport = errors.New("handover answer lost")

// askHandover is one PathHandover call to the holder.
func (m *mesh) askHandover(ctx context.Context, loc wire.RoomLocation, a wire.Auth) (wire.HandoverResponse, error) {
	var h wire.HandoverResponse
	ctx, cancel := context.WithTimeout(ctx, handoverAttemptTimeout)
	defer cancel()
	b, err := wire.Call{Method: http.MethodPost, URL: loc.Endpoint + wire.PathHandover, Secret: m.secret,
		Body:      wire.HandoverRequest{Name: a.RoomName, Secret: a.ClientSecret, BootID: m.bootID},
		MaxAnswer: maxHandoverAnswer, OK: http.StatusOK}.Do(ctx, m.loc.client)
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return h, err
	case err != nil:
		return h, fmt.Errorf("%w: the holder: %w", errHandoverTransport, err)
	}
	if err := json.Unmarshal(b, &h); err != nil || h.Name != a.RoomName ||
		h.HostSecret == "" || h.ClientSecret == "" || h.From.Epoch == "" {
		return h, errors.New("the holder answered a malformed handover")
	}
	return h, nil
}
