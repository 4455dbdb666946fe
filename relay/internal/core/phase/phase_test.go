package phase

import (
	"errors"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// at returns a machine in phase p on a fake clock (through the legal
// transitions).
func at(t *testing.T, p Phase) (*Machine, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	m := New(clk)
	var steps []func() error
	switch p {
	case Hosted:
		steps = []func() error{m.HostArrived}
	case Vacant:
		steps = []func() error{m.HostArrived, m.HostGone}
	case Pending:
		steps = []func() error{m.HostArrived, m.HostGone, func() error { return m.Claimed(clk.Now().Add(time.Minute)) }}
	case Expired:
		steps = []func() error{m.HostArrived, m.HostGone, func() error { return m.Claimed(clk.Now().Add(time.Minute)) }}
	case Removed:
		steps = []func() error{m.Remove}
	}
	for _, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("reaching %v: %v", p, err)
		}
	}
	if p == Expired {
		clk.Advance(time.Minute)
	}
	if got := m.Now(); got != p {
		t.Fatalf("reached %v, want %v", got, p)
	}
	return &m, clk
}

// TestTransitions: every transition from every phase either moves the
// room where the table in the package doc says, or is refused with an
// *Error naming it and leaves the phase as it was.
func TestTransitions(t *testing.T) {
	all := []Phase{Awaiting, Hosted, Vacant, Pending, Expired, Removed}
	type move struct {
		name string
		do   func(*Machine) error
		to   map[Phase]Phase // from -> to; a phase not listed is refused
	}
	for _, mv := range []move{
		{"HostArrived", (*Machine).HostArrived, map[Phase]Phase{Awaiting: Hosted, Pending: Pending}},
		{"HostGone", (*Machine).HostGone, map[Phase]Phase{Hosted: Vacant, Pending: Vacant, Expired: Vacant}},
		{"Claimed", func(m *Machine) error { return m.Claimed(m.clk.Now().Add(time.Minute)) }, map[Phase]Phase{Hosted: Pending, Vacant: Pending, Expired: Pending}},
		{"Activated", (*Machine).Activated, map[Phase]Phase{Pending: Hosted}},
		{"AdoptedVacant", (*Machine).AdoptedVacant, map[Phase]Phase{Awaiting: Vacant}},
		{"Remove", (*Machine).Remove, map[Phase]Phase{Awaiting: Removed, Hosted: Removed, Vacant: Removed, Pending: Removed, Expired: Removed}},
	} {
		for _, from := range all {
			m, _ := at(t, from)
			err := mv.do(m)
			want, ok := mv.to[from]
			var pe *Error
			switch {
			case ok && err != nil:
				t.Errorf("%s from %v: %v", mv.name, from, err)
			case ok && m.Now() != want:
				t.Errorf("%s from %v: now %v, want %v", mv.name, from, m.Now(), want)
			case !ok && !errors.As(err, &pe):
				t.Errorf("%s from %v: not refused (%v, now %v)", mv.name, from, err, m.Now())
			case !ok && (pe.From != from || pe.Transition != mv.name || m.Now() != from):
				t.Errorf("%s from %v: refused as %v, now %v", mv.name, from, err, m.Now())
			}
		}
	}
}

// TestNowAppliesTheLease: a pending room reads expired from the instant
// its lease elapses, whoever reads it; a claim starts a fresh lease.
func TestNowAppliesTheLease(t *testing.T) {
	m, clk := at(t, Pending)
	clk.Advance(time.Minute - time.Nanosecond)
	if p := m.Now(); p != Pending {
		t.Fatalf("%v a nanosecond before the lease's end", p)
	}
	if got, want := m.LeaseUntil(), clk.Now().Add(time.Nanosecond); !got.Equal(want) {
		t.Fatalf("lease until %v, want %v", got, want)
	}
	clk.Advance(time.Nanosecond)
	if p := m.Now(); p != Expired {
		t.Fatalf("%v once the lease ended", p)
	}
	if err := m.Activated(); err == nil {
		t.Fatal("an expired claim activated")
	}
	if err := m.Claimed(clk.Now().Add(time.Second)); err != nil || m.Now() != Pending {
		t.Fatalf("claim of an expired room: %v, now %v", err, m.Now())
	}
}

// TestVacantFor: the time since the host left, from the transition that
// made the room vacant; zero in any other phase.
func TestVacantFor(t *testing.T) {
	m, clk := at(t, Vacant)
	clk.Advance(3 * time.Second)
	if d := m.VacantFor(); d != 3*time.Second {
		t.Fatalf("vacant for %v, want 3s", d)
	}
	h, _ := at(t, Hosted)
	if d := h.VacantFor(); d != 0 {
		t.Fatalf("a hosted room vacant for %v", d)
	}
	a, clk := at(t, Awaiting)
	if err := a.AdoptedVacant(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if d := a.VacantFor(); d != time.Second {
		t.Fatalf("an adopted vacant room vacant for %v, want the time since its adoption", d)
	}
}

// TestActivatedAt: set by the activation, cleared by the next claim.
func TestActivatedAt(t *testing.T) {
	m, clk := at(t, Pending)
	clk.Advance(time.Second)
	if err := m.Activated(); err != nil {
		t.Fatal(err)
	}
	if !m.ActivatedAt().Equal(clk.Now()) {
		t.Fatalf("activated at %v, want %v", m.ActivatedAt(), clk.Now())
	}
	if err := m.Claimed(clk.Now().Add(time.Minute)); err != nil || !m.ActivatedAt().IsZero() {
		t.Fatalf("after a new claim: %v, activated at %v", err, m.ActivatedAt())
	}
}
