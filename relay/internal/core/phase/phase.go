// Package phase is a room incarnation's life as one state machine: its
// phase, the times the phase depends on, and the named transitions between
// phases. Nothing outside this package can set a phase; every read goes
// through Machine.Now, which applies the clock first.
//
//	transition     from                      to
//	HostArrived    awaiting                  hosted     the allocation's host connects
//	               pending                   pending    the promoted host's provisional socket connects
//	HostGone       hosted, pending, expired  vacant     the (provisional) host's socket leaves
//	Claimed        hosted, vacant, expired   pending    a claim: the activation lease starts
//	Activated      pending                   hosted     the promoted host activates
//	(the clock)    pending                   expired    the lease elapses (applied by Now)
//	AdoptedVacant  awaiting                  vacant     a room handed over by a holder that
//	                                                    predates host migration, its host gone
//	Remove         any but removed           removed    expired, closed, handed over, taken
//	                                                    over, ended (terminal)
//
// A transition from any other phase changes nothing and returns an *Error.
// A Machine is not safe for concurrent use: the room's lock guards it.
package phase

import (
	"fmt"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// Phase is where a room incarnation is in its life.
type Phase uint8

const (
	// Awaiting: allocated (or adopted) and its host has not connected yet:
	// reserved for its allocation.
	Awaiting Phase = iota
	// Hosted: its host is connected and active: the allocation's host, or
	// a promoted host that activated.
	Hosted
	// Vacant: no host owns it (the host left, or a promoted host's
	// provisional socket did before it activated); claimable.
	Vacant
	// Pending: claimed; the promoted host's activation lease runs.
	Pending
	// Expired: the lease elapsed before activation; claimable.
	Expired
	// Removed: the incarnation ended and left the table.
	Removed
)

var names = [...]string{"awaiting", "hosted", "vacant", "pending", "expired", "removed"}

func (p Phase) String() string {
	if int(p) < len(names) {
		return names[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Error is a transition refused from the phase the room was in.
type Error struct {
	Transition string
	From       Phase
}

func (e *Error) Error() string {
	return fmt.Sprintf("room phase: %s refused in phase %v", e.Transition, e.From)
}

// Machine is one incarnation's phase. Its zero value is not usable: New
// gives it its clock.
type Machine struct {
	clk         clock.Clock // static
	p           Phase
	leaseUntil  time.Time // the activation deadline of the current claim (pending)
	vacantSince time.Time // when the room last lost its host (vacant)
	activatedAt time.Time // when the promoted host activated; zero until then
	born        time.Time // when the incarnation was allocated (or adopted): its awaiting began
}

// New is a room's life from its allocation: awaiting its host, from now.
func New(clk clock.Clock) Machine { return Machine{clk: clk, p: Awaiting, born: clk.Now()} }

// Now is the phase, after applying what time alone changes: pending
// becomes expired once the lease has elapsed.
func (m *Machine) Now() Phase {
	if m.p == Pending && !m.clk.Now().Before(m.leaseUntil) {
		m.p = Expired
	}
	return m.p
}

// Live reports whether the incarnation has not ended.
func (m *Machine) Live() bool { return m.p != Removed }

// LeaseUntil is the current claim's activation deadline (zero before any
// claim).
func (m *Machine) LeaseUntil() time.Time { return m.leaseUntil }

// ActivatedAt is when the promoted host of the current claim activated
// (zero until it did, and at generation 0).
func (m *Machine) ActivatedAt() time.Time { return m.activatedAt }

// AwaitingFor is how long the room has been awaiting its allocation's
// host (zero unless it is).
func (m *Machine) AwaitingFor() time.Duration {
	if m.Now() != Awaiting {
		return 0
	}
	return m.clk.Now().Sub(m.born)
}

// VacantFor is how long the room has been vacant (zero unless it is).
func (m *Machine) VacantFor() time.Duration {
	if m.Now() != Vacant {
		return 0
	}
	return m.clk.Now().Sub(m.vacantSince)
}

// move changes the phase to to if the room is in one of from, or refuses
// with an *Error naming the transition.
func (m *Machine) move(transition string, to Phase, from ...Phase) error {
	cur := m.Now()
	for _, f := range from {
		if cur == f {
			m.p = to
			return nil
		}
	}
	return &Error{Transition: transition, From: cur}
}

// HostArrived: the allocation's host connects (awaiting -> hosted), or
// the promoted host's provisional socket does (pending stays pending).
func (m *Machine) HostArrived() error {
	if m.Now() == Pending {
		return nil
	}
	return m.move("HostArrived", Hosted, Awaiting)
}

// HostGone: the host's (or the provisional host's) socket left: hosted,
// pending or expired -> vacant, from now.
func (m *Machine) HostGone() error {
	if err := m.move("HostGone", Vacant, Hosted, Pending, Expired); err != nil {
		return err
	}
	m.vacantSince = m.clk.Now()
	return nil
}

// Claimed: a claim commits (hosted with the live host's grant, or vacant
// or expired with the client credential): -> pending, its lease running
// until until (the caller's claim time plus the lease, so the deadline it
// reports is exactly a lease after the claim time it reports); nobody has
// activated for it yet.
func (m *Machine) Claimed(until time.Time) error {
	if err := m.move("Claimed", Pending, Hosted, Vacant, Expired); err != nil {
		return err
	}
	m.leaseUntil, m.activatedAt = until, time.Time{}
	return nil
}

// Activated: the promoted host opens the room: pending -> hosted.
func (m *Machine) Activated() error {
	if err := m.move("Activated", Hosted, Pending); err != nil {
		return err
	}
	m.activatedAt = m.clk.Now()
	return nil
}

// AdoptedVacant: a room handed over with its host gone (a holder from
// before host migration said so): awaiting -> vacant, from now.
func (m *Machine) AdoptedVacant() error {
	if err := m.move("AdoptedVacant", Vacant, Awaiting); err != nil {
		return err
	}
	m.vacantSince = m.clk.Now()
	return nil
}

// Remove ends the incarnation: any live phase -> removed.
func (m *Machine) Remove() error {
	return m.move("Remove", Removed, Awaiting, Hosted, Vacant, Pending, Expired)
}
