package balancer

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// placedOn allocates name through the Go API with p and returns the
// endpoint of the relay that holds it.
func placedOn(t *testing.T, h *harness, name string, p Placement) string {
	t.Helper()
	if _, err := h.s.Allocate(context.Background(), name, "id-"+name, p); err != nil {
		t.Fatalf("allocate %s with %+v: %v", name, p, err)
	}
	return h.s.st.rooms.get(name).live.Load().relay.info.Endpoint
}

// allocateQuery is POST /allocate_ws?query (region eu).
func allocateQuery(h *harness, name, query string) (string, *wire.Error) {
	h.t.Helper()
	st, b, _ := h.do(http.MethodPost, "/allocate_ws?"+query, map[string]string{"name": name, "region": "eu", "allocation_id": "id-" + name}, nil)
	if err := decodeAnswer(h.t, st, b, nil); err != nil {
		return "", err
	}
	return h.s.st.rooms.get(name).live.Load().relay.info.Endpoint, nil
}

// loaded registers a fake relay of region with labels and capacity and
// gives it rooms with conns connections each.
func loaded(t *testing.T, h *harness, region string, labels map[string]string, capacity wire.Capacity, conns ...int) *fakeRelay {
	t.Helper()
	r := newFakeRelay(t, region)
	r.set(func(f *fakeRelay) { f.info.Labels, f.info.Capacity = labels, capacity })
	r.register(h)
	for i, n := range conns {
		wantStatuses(t, r.publish(h, pub(r.info.MachineID+"-"+string(rune('a'+i)), "e", 1, n)), wire.PubApplied)
	}
	return r
}

func drain(t *testing.T, h *harness, r *fakeRelay) {
	t.Helper()
	if st, body, _ := h.do(http.MethodPost, "/v1/instances/"+r.boot()+"/drain", map[string]string{"Authorization": "Bearer " + testSecret}, nil); st != http.StatusOK {
		t.Fatalf("drain: %d %s", st, body)
	}
}

// TestPlacementStrategies: within the requested region, least takes the
// relay with the fewest connections, most the one with the most (of those
// not full), random what the injected Rand says; the strategy comes from
// Options.Placement unless the placement names one (Go API or
// ?strategy=). The region comes first whatever the strategy.
func TestPlacementStrategies(t *testing.T) {
	var draws []int
	h := newHarness(t, func(o *Options) {
		o.Placement = StrategyMost
		o.Rand = func(n int) int {
			draws = append(draws, n)
			return 0
		}
	})
	light := loaded(t, h, "eu", nil, wire.Capacity{}, 1)
	heavy := loaded(t, h, "eu", nil, wire.Capacity{}, 5)
	mid := loaded(t, h, "eu", nil, wire.Capacity{}, 3)
	far := loaded(t, h, "us", nil, wire.Capacity{}, 50)

	if got := placedOn(t, h, "default", Placement{Region: "eu"}); got != heavy.info.Endpoint {
		t.Fatalf("Options.Placement most: placed on %s, want the heaviest eu relay", got)
	}
	if got := placedOn(t, h, "least", Placement{Region: "eu", Strategy: StrategyLeast}); got != light.info.Endpoint {
		t.Fatalf("least: placed on %s, want the lightest eu relay", got)
	}
	if got, err := allocateQuery(h, "least-q", "strategy=least"); err != nil || got != light.info.Endpoint {
		t.Fatalf("?strategy=least: %s %v", got, err)
	}
	if got := placedOn(t, h, "most-us", Placement{Region: "us", Strategy: StrategyMost}); got != far.info.Endpoint {
		t.Fatal("most: the requested region did not come first")
	}
	if got := placedOn(t, h, "least-us", Placement{Region: "us", Strategy: StrategyLeast}); got != far.info.Endpoint {
		t.Fatal("least: the requested region did not come first")
	}
	// Random: the eu relays shuffled by Rand (always 0: Fisher-Yates
	// moves each last element to the front in turn), then the others.
	draws = nil
	got := placedOn(t, h, "random", Placement{Region: "eu", Strategy: StrategyRandom})
	if len(draws) != 2 || draws[0] != 3 || draws[1] != 2 {
		t.Fatalf("random drew %v, want a shuffle of the 3 eu relays (n = 3, 2); the one us relay needs none", draws)
	}
	if got == far.info.Endpoint {
		t.Fatal("random: placed outside the requested region")
	}
	_ = mid
}

// TestPlacementRandomSpreads: with the default Rand every fitting relay of
// the region gets rooms, and never a draining or full one.
func TestPlacementRandomSpreads(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Placement = StrategyRandom })
	a := loaded(t, h, "eu", nil, wire.Capacity{})
	b := loaded(t, h, "eu", nil, wire.Capacity{})
	drained := loaded(t, h, "eu", nil, wire.Capacity{})
	full := loaded(t, h, "eu", nil, wire.Capacity{MaxConnections: 4}, 4)
	drain(t, h, drained)
	seen := map[string]int{}
	for i := range 40 {
		seen[placedOn(t, h, "r"+string(rune('A'+i)), Placement{Region: "eu"})]++
	}
	if seen[a.info.Endpoint] == 0 || seen[b.info.Endpoint] == 0 || len(seen) != 2 {
		t.Fatalf("40 random placements: %v; want both fitting relays, never %s (draining) or %s (full)",
			seen, drained.info.Endpoint, full.info.Endpoint)
	}
}

// TestPlacementLabels: required labels keep a room off relays that lack
// any of them, even lighter ones, in every region; nothing carrying them
// is 409 no_candidate that says why, on the Go API and on ?labels=.
func TestPlacementLabels(t *testing.T) {
	h := newHarness(t, nil)
	free := loaded(t, h, "eu", map[string]string{"tier": "free"}, wire.Capacity{})
	pro := loaded(t, h, "eu", map[string]string{"tier": "pro", "gpu": "yes"}, wire.Capacity{}, 9)
	proUS := loaded(t, h, "us", map[string]string{"tier": "pro"}, wire.Capacity{})
	plain := loaded(t, h, "eu", nil, wire.Capacity{})

	if got := placedOn(t, h, "pro", Placement{Region: "eu", Labels: map[string]string{"tier": "pro"}}); got != pro.info.Endpoint {
		t.Fatalf("tier=pro in eu: placed on %s, want the (heavier) eu pro relay", got)
	}
	if got, err := allocateQuery(h, "pro-q", "labels=tier:pro,gpu:yes"); err != nil || got != pro.info.Endpoint {
		t.Fatalf("?labels=tier:pro,gpu:yes: %s %v", got, err)
	}
	drain(t, h, pro)
	if got := placedOn(t, h, "pro-elsewhere", Placement{Region: "eu", Labels: map[string]string{"tier": "pro"}}); got != proUS.info.Endpoint {
		t.Fatalf("the eu pro relay draining: placed on %s, want the us pro relay", got)
	}
	if got := placedOn(t, h, "any", Placement{Region: "eu"}); got != free.info.Endpoint && got != plain.info.Endpoint {
		t.Fatalf("no labels asked: placed on %s", got)
	}

	_, err := h.s.Allocate(context.Background(), "gpu", "id-gpu", Placement{Region: "eu", Labels: map[string]string{"gpu": "yes"}})
	want := "4 relays: 3 without the labels, 1 draining; labels asked: gpu:yes"
	var we *wire.Error
	if !errorsAs(err, &we) || we.Code != "no_candidate" || we.Status != http.StatusConflict || !we.Retryable || we.Message != want {
		t.Fatalf("gpu=yes: %v, want 409 no_candidate %q", err, want)
	}
	_, qerr := allocateQuery(h, "gpu-q", "labels=gpu:yes")
	if qerr == nil || qerr.Code != "no_candidate" || qerr.Status != http.StatusConflict || qerr.Message != want {
		t.Fatalf("?labels=gpu:yes: %+v, want 409 no_candidate %q", qerr, want)
	}
}

// TestPlacementCapacity: a relay at its reported maxRooms or
// maxConnections takes no new room (the next one does, even a heavier
// one or another region's); all full is no_candidate naming the bound,
// and a room released frees the relay again.
func TestPlacementCapacity(t *testing.T) {
	h := newHarness(t, nil)
	roomsFull := loaded(t, h, "eu", nil, wire.Capacity{MaxRooms: 1}, 0)
	connsFull := loaded(t, h, "eu", nil, wire.Capacity{MaxConnections: 10}, 6, 4)
	spare := loaded(t, h, "us", nil, wire.Capacity{MaxRooms: 1})

	if got := placedOn(t, h, "one", Placement{Region: "eu"}); got != spare.info.Endpoint {
		t.Fatalf("both eu relays full: placed on %s, want the us one", got)
	}
	_, err := h.s.Allocate(context.Background(), "two", "id-two", Placement{Region: "eu", Strategy: StrategyMost})
	var we *wire.Error
	if !errorsAs(err, &we) || we.Code != "no_candidate" || we.Message != "3 relays: 3 full (e.g. rooms 1/1)" && we.Message != "3 relays: 3 full (e.g. connections 10/10)" {
		t.Fatalf("every relay full: %v", err)
	}
	// PurrNet's allocation (no placement asked) keeps its 503 no_relays,
	// with the same reason.
	_, perr := h.allocate("two", "eu", "id-two")
	if perr == nil || perr.Code != "no_relays" || perr.Status != http.StatusServiceUnavailable || !perr.Retryable || !strings.Contains(perr.Message, "3 full") {
		t.Fatalf("PurrNet's allocation with every relay full: %+v, want 503 no_relays saying 3 full", perr)
	}
	// One room released: its relay takes rooms again.
	roomsFull.unregister(h, wire.Removal{Name: roomsFull.info.MachineID + "-a", Epoch: "e", Revision: 1})
	if got := placedOn(t, h, "three", Placement{Region: "eu"}); got != roomsFull.info.Endpoint {
		t.Fatalf("after a release: placed on %s, want the relay that had room again", got)
	}
	_ = connsFull
}

// TestPlacementSingleFullAndDraining: the message of one full relay
// names its numbers; a fleet that only drains says so as before.
func TestPlacementSingleFullAndDraining(t *testing.T) {
	h := newHarness(t, nil)
	r := loaded(t, h, "eu", nil, wire.Capacity{MaxRooms: 50, MaxConnections: 100}, 60, 40)
	d := loaded(t, h, "eu", nil, wire.Capacity{})
	drain(t, h, d)
	_, err := h.s.Allocate(context.Background(), "x", "id-x", Placement{})
	var we *wire.Error
	if !errorsAs(err, &we) || we.Message != "2 relays: 1 draining, 1 full (connections 100/100)" {
		t.Fatalf("one draining, one full: %v", err)
	}
	drain(t, h, r)
	if _, err := h.s.Allocate(context.Background(), "x", "id-x", Placement{}); !errorsAs(err, &we) || we.Message != "every relay is draining" {
		t.Fatalf("every relay draining: %v", err)
	}
}

// TestPlacementRelaySaysFull: the relay enforces its own capacity (the
// balancer's counts can lag): relay_full passes to the next candidate, and
// when every relay tried refuses it is no_candidate saying so (503
// no_relays for PurrNet), not relay_unavailable.
func TestPlacementRelaySaysFull(t *testing.T) {
	h := newHarness(t, nil)
	a, b := loaded(t, h, "eu", nil, wire.Capacity{}), loaded(t, h, "eu", nil, wire.Capacity{})
	a.set(func(f *fakeRelay) { f.allocMode = allocFull })
	if got := placedOn(t, h, "r1", Placement{Region: "eu"}); got != b.info.Endpoint {
		t.Fatal("a relay that said full was not skipped")
	}
	b.set(func(f *fakeRelay) { f.allocMode = allocDraining })
	_, err := h.s.Allocate(context.Background(), "r2", "id-r2", Placement{Region: "eu"})
	var we *wire.Error
	if !errorsAs(err, &we) || we.Code != "no_candidate" || we.Message != "the 2 relays tried refused the room: 1 full, 1 draining" {
		t.Fatalf("every relay refused: %v", err)
	}
	if _, perr := h.allocate("r2", "eu", "id-r2"); perr == nil || perr.Code != "no_relays" || perr.Status != http.StatusServiceUnavailable {
		t.Fatalf("PurrNet's allocation, every relay refusing: %+v", perr)
	}
}

// TestPlacementBadInput: malformed placement input is a 400 that says
// what is wrong, on ?labels=/?strategy= and on the Go API, and a
// registration with invalid labels or capacity is refused.
func TestPlacementBadInput(t *testing.T) {
	h := newHarness(t, nil)
	loaded(t, h, "eu", nil, wire.Capacity{})
	for _, tc := range []struct{ query, want string }{
		{"labels=tier", `labels: entry 1 ("tier") is not key:value`},
		{"labels=tier:pro,tier:free", `labels: key "tier" is given twice`},
		{"labels=a:b&labels=c:d", "the labels parameter is given more than once"},
		{"strategy=fullest", `placement strategy "fullest" is not least, most or random`},
		{"labels=%zz", "malformed query string"},
	} {
		_, err := allocateQuery(h, "bad", tc.query)
		if err == nil || err.Code != "bad_request" || err.Status != http.StatusBadRequest || err.Message != tc.want {
			t.Errorf("?%s: %+v, want 400 %q", tc.query, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name, id string
		p        Placement
		want     string
	}{
		{"", "a", Placement{}, "room name must be"},
		{"n", "", Placement{}, "allocation id must be"},
		{"n", "a", Placement{Labels: map[string]string{"bad key": "v"}}, "placement labels:"},
		{"n", "a", Placement{Strategy: "fullest"}, "is not least, most or random"},
		{"n", "a", Placement{Region: strings.Repeat("r", wire.MaxRegionLen+1)}, "placement region must be 1 to 64 bytes"},
		{"n", "a", Placement{Region: "e\nu"}, "placement region must be valid UTF-8 without control characters"},
		{"bad\x91", "a", Placement{}, "room name must be valid UTF-8"},
		{"n", "a\x00", Placement{}, "allocation id must be valid UTF-8 without control characters"},
	} {
		_, err := h.s.Allocate(context.Background(), tc.name, tc.id, tc.p)
		var we *wire.Error
		if !errorsAs(err, &we) || we.Code != "bad_request" || !strings.Contains(we.Message, tc.want) {
			t.Errorf("Allocate(%q, %q, %+v): %v, want bad_request %q", tc.name, tc.id, tc.p, err, tc.want)
		}
	}
	r := newFakeRelay(t, "eu")
	for _, info := range []func(*wire.RelayInfo){
		func(i *wire.RelayInfo) { i.Labels = map[string]string{"k": "v w"} },
		func(i *wire.RelayInfo) { i.Capacity.MaxConnections = -1 },
	} {
		in := r.info
		info(&in)
		if _, err := r.registerAs(h, in); err == nil || err.Code != "bad_request" {
			t.Errorf("registration with labels %v capacity %+v: %v", in.Labels, in.Capacity, err)
		}
	}
}

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]Strategy{"": StrategyLeast, "least": StrategyLeast, "most": StrategyMost, "random": StrategyRandom} {
		if got, err := ParseStrategy(in); err != nil || got != want {
			t.Errorf("ParseStrategy(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"Least", "fullest", " most", "least-loaded"} {
		if _, err := ParseStrategy(in); err == nil {
			t.Errorf("ParseStrategy(%q) accepted", in)
		}
	}
	if _, err := New(Options{Secret: testSecret, Placement: "fullest"}); err == nil {
		t.Error("New accepted an unknown placement strategy")
	}
}

func errorsAs(err error, we **wire.Error) bool { return errors.As(err, we) }
