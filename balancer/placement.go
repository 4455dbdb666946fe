package balancer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// Strategy orders the relays of one region group for a new room.
type Strategy string

// Placement strategies (BALANCER_PLACEMENT).
const (
	// StrategyLeast: fewest connections, then fewest rooms (the default:
	// spread the players).
	StrategyLeast Strategy = "least"
	// StrategyMost: most connections, then most rooms, among the relays
	// that are not full (pack rooms onto few relays, so that the others
	// empty and can be stopped).
	StrategyMost Strategy = "most"
	// StrategyRandom: uniformly at random (Options.Rand).
	StrategyRandom Strategy = "random"
)

// ParseStrategy reads a strategy: "least", "most" or "random" ("" is
// least).
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case "":
		return StrategyLeast, nil
	case StrategyLeast, StrategyMost, StrategyRandom:
		return st, nil
	}
	return "", fmt.Errorf("placement strategy %s is not least, most or random", strconv.QuoteToASCII(cut(s, 32)))
}

// Placement is where a new room may go. The zero value is what PurrNet's
// own allocations get: the server's strategy, no label required, the
// nearest region the client asked for.
//
// A room goes to a relay that is registered, not draining, not retiring,
// reachable by players (not "starting"), not stale (two missed heartbeats
// of three, or a failed health probe since its last good one), not full
// (at its reported wire.Capacity of rooms or connections) and carries
// every label of Labels. Among those, the relays of Region (case-insensitive)
// come first, ordered by Strategy; the other regions' follow, ordered the
// same way, and are used when Region has none that fits (or to retry an
// unreachable one). Nothing fits: wire.ErrNoCandidate, whose message says
// why (how many relays were left out, for which reason).
type Placement struct {
	Region   string            // preferred region; "" = none (every region alike)
	Labels   map[string]string // required labels (wire.ValidateLabels); nil = none
	Strategy Strategy          // "" = Options.Placement
	// Instance pins the room to one relay (its boot id or machine id): a
	// matchmaker's choice. That relay draining, retiring, starting or
	// stale is 409 instance_draining, not registered 404 not_found; full
	// or without the labels, no_candidate as usual.
	Instance string
	// Force, with Instance, places the room on that relay while an
	// operator has drained it (POST /v1/instances/{id}/drain): a
	// matchmaker filling a relay kept for its own games. A relay draining
	// itself (shutting down), retiring, starting or stale still refuses.
	Force bool
}

// validate checks p as a request: a bad_request that says what is wrong.
func (p Placement) validate() error {
	if p.Region != "" {
		if err := validValue("placement region", p.Region, wire.MaxRegionLen); err != nil {
			return err
		}
	}
	if err := wire.ValidateLabels(p.Labels); err != nil {
		return wire.ErrBadRequest.WithMessage("placement " + err.Error())
	}
	if _, err := ParseStrategy(string(p.Strategy)); err != nil {
		return wire.ErrBadRequest.WithMessage(err.Error())
	}
	if p.Force && p.Instance == "" {
		return wire.ErrBadRequest.WithMessage("force places a room on one drained relay: it needs an instance")
	}
	if p.Instance != "" {
		if err := validValue("placement instance", p.Instance, maxIDLen); err != nil {
			return err
		}
	}
	return nil
}

// Allocate places (or replays) room name for allocationID as POST
// /allocate_ws does, with an explicit placement: for a Go caller such as
// a matchmaker's route. It answers the host capability (the relay's
// registered host injected). Errors are *wire.Error: bad_request for bad
// input, wire.ErrNoCandidate (409) when no relay fits, and those of
// /allocate_ws otherwise (room_name_taken, allocation_in_progress,
// allocation_outcome_indeterminate, relay_bad_answer, relay_unavailable).
// It may be called concurrently.
func (s *Server) Allocate(ctx context.Context, name, allocationID string, p Placement) (wire.Capability, error) {
	if err := validValue("room name", name, wire.MaxSessionIDLen); err != nil {
		return wire.Capability{}, err
	}
	if err := validValue("allocation id", allocationID, wire.MaxAllocationIDLen); err != nil {
		return wire.Capability{}, err
	}
	if err := p.validate(); err != nil {
		return wire.Capability{}, err
	}
	if s.settling() {
		return wire.Capability{}, wire.ErrBalancerSettling
	}
	return s.st.allocate(ctx, name, allocationID, p, false, "")
}

// validValue holds a Go caller's value to the rules of the header it
// travels in to the relay (wire.HeaderValue): 1 to max bytes of valid
// UTF-8 without control characters.
func validValue(what, v string, max int) error {
	if v == "" || len(v) > max {
		return wire.ErrBadRequest.WithMessage(what + " must be 1 to " + strconv.Itoa(max) + " bytes")
	}
	if !validText(v) {
		return wire.ErrBadRequest.WithMessage(what + " must be valid UTF-8 without control characters")
	}
	return nil
}

// placeTally counts the registered relays a placement left out, by the
// first reason that applies (labels, retiring, draining, starting, stale,
// full), and keeps one full relay's numbers for the message. Plain
// integers: filled under the registry's read lock at no allocation,
// formatted only when nothing fits.
type placeTally struct {
	registered, unlabelled, draining, retiring, starting, stale, full int
	// pinned: Placement.Instance was registered; pinnedDraining: and
	// draining, retiring or starting (pinnedWhy says which). Relays other
	// than the pinned one are not counted.
	pinned, pinnedDraining bool
	pinnedWhy              string
	fullWhat               string // "rooms" or "connections" of the first full relay
	fullHave, fullMax      int64
}

// full reports whether r holds as many rooms or connections as its
// reported capacity, and which, with the numbers.
func (r *relayEntry) full() (what string, have, max int64) {
	c := r.info.Capacity
	if n := r.rooms.Load(); c.MaxRooms > 0 && n >= int64(c.MaxRooms) {
		return "rooms", n, int64(c.MaxRooms)
	}
	if n := r.conns.Load(); c.MaxConnections > 0 && n >= int64(c.MaxConnections) {
		return "connections", n, int64(c.MaxConnections)
	}
	return "", 0, 0
}

// candidates lists the relays that may take a new room under p (see
// Placement) at now, the region's first, each group in strategy's order
// (ties: by endpoint), and tallies the others. defExpiry is
// Options.RelayExpiry (staleness); rnd(n) is in [0, n).
func (g *registry) candidates(p Placement, strategy Strategy, rnd func(int) int, now time.Time, defExpiry time.Duration) ([]*relayEntry, placeTally) {
	var t placeTally
	g.mu.RLock()
	t.registered = len(g.byEndpoint)
	out := make([]*relayEntry, 0, len(g.byEndpoint))
	for _, r := range g.byEndpoint {
		// Only a pinned relay can be forced (the loop skips every other).
		forced := false
		if p.Instance != "" {
			if r.info.BootID != p.Instance && (r.info.MachineID == "" || r.info.MachineID != p.Instance) {
				continue
			}
			t.pinnedWhy = r.unplaceableWhyLocked(now, defExpiry, p.Force)
			t.pinned, t.pinnedDraining = true, t.pinnedWhy != ""
			forced = p.Force && r.adminDraining && !r.selfDraining
		}
		switch {
		case !wire.HasLabels(r.info.Labels, p.Labels):
			t.unlabelled++
		case r.retiring:
			t.retiring++
		case r.drainingLocked() && !forced:
			t.draining++
		case r.unreachable:
			t.starting++
		case r.staleLocked(now, defExpiry):
			t.stale++
		default:
			what, have, max := r.full()
			if what == "" {
				out = append(out, r)
				break
			}
			if t.full == 0 {
				t.fullWhat, t.fullHave, t.fullMax = what, have, max
			}
			t.full++
		}
	}
	g.mu.RUnlock()
	inRegion := func(r *relayEntry) bool { return p.Region != "" && strings.EqualFold(r.info.Region, p.Region) }
	if strategy == StrategyRandom {
		n := 0
		for i, r := range out {
			if inRegion(r) {
				out[n], out[i] = out[i], out[n]
				n++
			}
		}
		shuffle(out[:n], rnd)
		shuffle(out[n:], rnd)
		return out, t
	}
	sign := 1
	if strategy == StrategyMost {
		sign = -1
	}
	slices.SortFunc(out, func(a, b *relayEntry) int {
		if ra, rb := inRegion(a), inRegion(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.conns.Load(), b.conns.Load()); c != 0 {
			return sign * c
		}
		if c := cmp.Compare(a.rooms.Load(), b.rooms.Load()); c != 0 {
			return sign * c
		}
		return strings.Compare(a.info.Endpoint, b.info.Endpoint)
	})
	return out, t
}

// shuffle is Fisher-Yates with rnd.
func shuffle(rs []*relayEntry, rnd func(int) int) {
	for i := len(rs) - 1; i > 0; i-- {
		j := rnd(i + 1)
		rs[i], rs[j] = rs[j], rs[i]
	}
}

// noCandidate is wire.ErrNoCandidate saying why nothing fits p, e.g.
// "3 relays: 1 without the labels, 1 draining, 1 full (rooms 50/50);
// labels asked: tier:pro".
func (t placeTally) noCandidate(p Placement) error {
	switch {
	case p.Instance != "" && !t.pinned:
		return wire.ErrInstanceNotFound.WithMessage("no registered relay has boot id or machine id " + strconv.QuoteToASCII(p.Instance))
	case p.Instance != "" && t.pinnedDraining:
		return wire.ErrInstanceDraining.WithMessage("relay " + strconv.QuoteToASCII(p.Instance) + " is " + t.pinnedWhy + ": it takes no new room")
	}
	var b strings.Builder
	switch {
	case t.registered == 0:
		b.WriteString("no relay is registered")
	case len(p.Labels) == 0 && t.draining == t.registered:
		b.WriteString("every relay is draining")
	case len(p.Labels) == 0 && t.draining+t.retiring+t.starting+t.stale == t.registered:
		fmt.Fprintf(&b, "no relay takes rooms: %d draining, %d retiring, %d starting (not yet reachable by players), %d stale (missed heartbeats or a failed health probe)",
			t.draining, t.retiring, t.starting, t.stale)
	default:
		b.WriteString(plural(t.registered, "relay"))
		b.WriteString(":")
		sep := " "
		part := func(n int, s string) {
			if n > 0 {
				fmt.Fprintf(&b, "%s%d %s", sep, n, s)
				sep = ", "
			}
		}
		part(t.unlabelled, "without the labels")
		part(t.draining, "draining")
		part(t.retiring, "retiring")
		part(t.starting, "starting")
		part(t.stale, "stale (missed heartbeats or a failed health probe)")
		if t.full > 0 {
			eg := ""
			if t.full > 1 {
				eg = "e.g. "
			}
			part(t.full, fmt.Sprintf("full (%s%s %d/%d)", eg, t.fullWhat, t.fullHave, t.fullMax))
		}
	}
	// The region is a preference (the others take the room when it has
	// no relay that fits), so only the labels can explain a refusal.
	if len(p.Labels) > 0 {
		fmt.Fprintf(&b, "; labels asked: %s", wire.FormatLabels(p.Labels, ':'))
	}
	return wire.ErrNoCandidate.WithMessage(b.String())
}

// refusedAll is wire.ErrNoCandidate for an allocation whose every tried
// relay said it takes no room (full, draining or retiring, counted as
// draining: it certainly took none)
// although the balancer's counts let it try them.
func refusedAll(full, draining int) error {
	var parts []string
	if full > 0 {
		parts = append(parts, strconv.Itoa(full)+" full")
	}
	if draining > 0 {
		parts = append(parts, strconv.Itoa(draining)+" draining")
	}
	return wire.ErrNoCandidate.WithMessage(fmt.Sprintf("the %s tried refused the room: %s",
		plural(full+draining, "relay"), strings.Join(parts, ", ")))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// cut shortens s to n bytes for an error message.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
