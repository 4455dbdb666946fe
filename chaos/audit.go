package chaos

import (
	"context"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// audit runs after every fault has healed: every room whose host is still
// connected must, within recoverBound, be listed as hosted by exactly one
// machine, be handed out by /join, and take a new player whose message the
// host echoes. A room that does not is lost with its host (InvRoomLost).
func (s *scheduler) audit(ctx context.Context) {
	start := time.Now()
	deadline := start.Add(s.recoverBound())
	for _, r := range s.w.liveRooms() {
		for {
			if ctx.Err() != nil || !r.up.Load() {
				break // ended or died meanwhile: the dead-room checks take it
			}
			err := s.probe(ctx, r, start)
			if err == nil {
				s.led.observe("recovery_after_fault", time.Since(start))
				s.led.add("audits_passed", 1)
				break
			}
			if time.Now().After(deadline) {
				if r.up.Load() {
					s.led.violate(InvRoomLost, r.name, "host connected but room not served %v after the fault healed: %v",
						s.recoverBound(), err)
				}
				break
			}
			pause(ctx, 250*time.Millisecond)
		}
	}
}

// probe checks one room once: hosted on one machine (in a view sampled
// after since), joinable, and a new player's message echoed by the host.
func (s *scheduler) probe(ctx context.Context, r *liveRoom, since time.Time) error {
	if !s.w.v.hostedOnce(r.name, since) {
		return errNotHosted
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	jc, err := s.w.api.Join(ctx, r.name)
	if err != nil {
		return err
	}
	c, err := client.DialClient(ctx, jc, r.name, &client.DialOptions{HTTPClient: s.w.hc})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Send(ctx, []byte("p9-audit")); err != nil {
		return err
	}
	b, err := c.Recv(ctx)
	if err != nil {
		return err
	}
	if string(b) != "p9-audit" {
		return wire.ErrRelayBadAnswer.WithMessage("the host echoed " + string(b))
	}
	return nil
}

var errNotHosted = wire.ErrRoomNotFound.WithMessage("no relay machine lists the room as hosted")
