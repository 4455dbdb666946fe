package relay

import (
	"net/http"
	"strconv"

	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// migrationHandler serves one migration call forwarded by the balancer
// (wire/migration.go): the internal secret (secretGuard), the balancer's
// route snapshot (the boot it routed to, the room's epoch and revision),
// then the call's own headers. The answer carries this relay's connection
// fields; the balancer replaces the host with the relay's registered one.
func (s *Server) migrationHandler(op wire.MigrationOp) wire.Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != op.Method() {
			w.Header().Set("Allow", op.Method())
			return wire.ErrMethodNotAllowed
		}
		if err := s.secretGuard(w, r, wire.CheckInternal); err != nil {
			return err
		}
		if r.Header.Get(wire.HeaderTargetBoot) != s.opts.BootID {
			return s.migrationDone(op, wire.ErrStaleBoot.WithMessage("this relay does not run the boot the balancer routed to"))
		}
		rt, err := routeOf(r)
		if err != nil {
			return err
		}
		req, err := wire.ParseMigrationRequest(r, op)
		if err != nil {
			return err
		}
		var out any
		conn := s.capability("")
		fill := func(st *wire.MigrationState) {
			st.Host, st.Port, st.UDPPort, st.UDPPortV2, st.SSL = conn.Host, conn.Port, conn.UDPPort, conn.UDPPortV2, conn.SSL
		}
		switch op {
		case wire.OpCurrent:
			var st wire.MigrationState
			if st, err = s.core.MigrationCurrent(req, rt); err == nil {
				fill(&st)
				out = st
			}
		case wire.OpAuthorize:
			out, err = s.core.Authorize(req, rt)
		case wire.OpClaim:
			var c wire.MigrationClaim
			if c, err = s.core.Claim(req, rt); err == nil {
				fill(&c.MigrationState)
				out = c
				s.log.Info("room claimed", "room", req.Name, "generation", c.Generation, "promoted", c.PromotedPlayerID, "replayed", c.Replayed)
			}
		case wire.OpActivate:
			var a wire.MigrationActivation
			if a, err = s.core.Activate(req, rt); err == nil {
				fill(&a.MigrationState)
				out = a
				s.log.Info("promoted host active", "room", req.Name, "generation", a.Generation)
			}
		}
		if err != nil {
			return s.migrationDone(op, err)
		}
		s.m.migrations.WithLabelValues(op.String(), "ok").Inc()
		wire.WriteJSON(w, http.StatusOK, out)
		return nil
	}
}

// migrationDone counts a failed call by its code and returns err.
func (s *Server) migrationDone(op wire.MigrationOp, err error) error {
	s.m.migrations.WithLabelValues(op.String(), errCode(err)).Inc()
	return err
}

// routeOf reads the balancer's route snapshot headers.
func routeOf(r *http.Request) (core.Route, error) {
	epoch, err := wire.HeaderValue(r, wire.HeaderRoomEpoch, wire.MaxIncarnationLen)
	if err != nil {
		return core.Route{}, err
	}
	rev, err := wire.HeaderValue(r, wire.HeaderRoomRevision, 20)
	if err != nil {
		return core.Route{}, err
	}
	n, err := strconv.ParseUint(rev, 10, 64)
	if err != nil {
		return core.Route{}, wire.ErrBadHeader.WithMessage("header " + wire.HeaderRoomRevision + " must be a decimal revision")
	}
	return core.Route{Epoch: epoch, Revision: n}, nil
}
