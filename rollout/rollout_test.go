package rollout_test

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/rollout"
	"github.com/purrfly/purrfly/wire"
)

// TestRolloutSimFleet rolls fly/sim.toml from purrfly:v1 to purrfly:v2 with
// real relay and balancer processes: never two relays down, every new boot
// proven, a busy room on the relay not yet reached keeps working and is
// reported interrupted when its drain deadline passes, the balancer lists
// exactly the new boots, smoke passes everywhere (also afterwards), leases
// are released, and a second run converges without redeploying.
func TestRolloutSimFleet(t *testing.T) {
	t.Parallel() // each test runs its own sim on its own loopback addresses
	f := startFleet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := map[string]wire.Ping{}
	for _, app := range f.apps {
		m := f.machine(t, app)
		before[app] = ping(t, f, app, m.ID)
	}

	room := openRoom(t, ctx, f, "sea")
	defer room.close()

	// Sample both relays at once, all through the rollout.
	s := startSampler(t, f)

	var (
		mu     sync.Mutex
		events []rollout.Event
		busy   error
		probed bool
	)
	o := f.opts("purrfly:v2")
	logf := rollout.PlainPrinter(testWriter{t})
	o.Observer = func(ev rollout.Event) {
		logf(ev)
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		// While relay-a is restarting, the room on relay-b still works.
		if ev.App == "purrfly-relay-a" && ev.Status == rollout.StatusVerifying && !probed {
			probed = true
			busy = room.roundTrip(ctx)
			room.readUntilClosed()
		}
	}
	res, err := rollout.Run(ctx, o)
	down := s.stop()
	if err != nil {
		t.Fatalf("rollout failed: %v", err)
	}
	if !probed || busy != nil {
		t.Errorf("room on relay-b while relay-a restarted: probed %v, err %v", probed, busy)
	}
	for _, round := range down {
		t.Errorf("two relays down at once at %s", round.Format(time.RFC3339Nano))
	}
	if s.rounds < 20 {
		t.Errorf("only %d sampling rounds", s.rounds)
	}
	checkOrder(t, events)
	checkProgress(t, events)

	var relayBoots []string
	for _, mr := range res.Machines {
		if mr.Action != rollout.ActionUpdated {
			t.Errorf("%s %s: action %s, want updated", mr.App, mr.Machine, mr.Action)
		}
		m := f.machine(t, mr.App)
		p := ping(t, f, mr.App, m.ID)
		switch {
		case m.Config.Image != "purrfly:v2":
			t.Errorf("%s: image %s", mr.App, m.Config.Image)
		case p.ImageRef != "registry.fly.io/purrfly:v2":
			t.Errorf("%s: /ping imageRef %s", mr.App, p.ImageRef)
		case p.BootID != mr.Boot || p.BootID == before[mr.App].BootID || mr.OldBoot != before[mr.App].BootID:
			t.Errorf("%s: boot %s, result %s -> %s, before %s", mr.App, p.BootID, mr.OldBoot, mr.Boot, before[mr.App].BootID)
		}
		if n := updates(m); n != 1 {
			t.Errorf("%s: %d updates, want 1", mr.App, n)
		}
		if mr.Role == rollout.RoleRelay {
			relayBoots = append(relayBoots, mr.Boot)
		}
		if mr.App == "purrfly-relay-b" && (mr.InterruptedRooms != 1 || mr.InterruptedConnections < 1) {
			t.Errorf("relay-b: interrupted %d rooms, %d connections; want the busy room", mr.InterruptedRooms, mr.InterruptedConnections)
		}
		if mr.App == "purrfly-relay-a" && mr.InterruptedRooms != 0 {
			t.Errorf("relay-a: interrupted %d rooms, want 0", mr.InterruptedRooms)
		}
	}
	sort.Strings(relayBoots)
	insts, err := client.NewBalancer(f.env.Balancer.URL).Instances(ctx, simSecret)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, in := range insts {
		listed = append(listed, in.BootID)
	}
	sort.Strings(listed)
	if !equal(listed, relayBoots) || !equal(res.Registered, relayBoots) {
		t.Errorf("balancer lists %v (result %v), want %v", listed, res.Registered, relayBoots)
	}
	if !equal(res.SmokeRegions, []string{"ams", "sea"}) {
		t.Errorf("smoke regions %v", res.SmokeRegions)
	}
	f.noLeases(t)
	for _, region := range []string{"ams", "sea"} { // purrctl smoke afterwards
		if _, err := client.Smoke(ctx, client.SmokeOptions{Balancer: f.env.Balancer.URL, Region: region, StrictRegion: true, HTTPClient: f.hc, Timeout: 5 * time.Second}); err != nil {
			t.Errorf("smoke in %s after the rollout: %v", region, err)
		}
	}

	done := func(evs []rollout.Event) string {
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Phase == rollout.PhaseDone {
				return evs[i].Message
			}
		}
		return ""
	}
	mu.Lock()
	first := done(events)
	mu.Unlock()
	if !strings.Contains(first, "3 machine(s) updated, 0 verified unchanged") {
		t.Errorf("first run's last word: %q", first)
	}

	// Running again converges: verified, nothing redeployed, and says so.
	var again []rollout.Event
	o2 := f.opts("purrfly:v2")
	o2.Observer = func(ev rollout.Event) { again = append(again, ev) }
	res2, err := rollout.Run(ctx, o2)
	if err != nil {
		t.Fatalf("second rollout failed: %v", err)
	}
	if msg := done(again); !strings.Contains(msg, "0 machine(s) updated, 3 verified unchanged") {
		t.Errorf("second run's last word: %q", msg)
	}
	var planned []string
	for _, ev := range again {
		if ev.Phase == rollout.PhasePlan {
			planned = append(planned, ev.Message)
		}
	}
	if len(planned) != 3 || !strings.Contains(planned[0], "will verify, not redeploy") ||
		strings.Contains(strings.Join(planned, "\n"), "not answering") {
		t.Errorf("second run's plan: %q", planned)
	}
	for i, mr := range res2.Machines {
		if mr.Action != rollout.ActionVerified || mr.Boot != res.Machines[i].Boot && mr.App == res.Machines[i].App {
			t.Errorf("second run: %s %s action %s boot %s", mr.App, mr.Machine, mr.Action, mr.Boot)
		}
		if n := updates(f.machine(t, mr.App)); n != 1 {
			t.Errorf("second run redeployed %s: %d updates", mr.App, n)
		}
	}
	f.noLeases(t)
}

// checkOrder: a machine is updated only after the previous one is done,
// relays before the balancer.
func checkOrder(t *testing.T, events []rollout.Event) {
	t.Helper()
	var order []string
	open := ""
	for _, ev := range events {
		if ev.Phase == rollout.PhasePlan || ev.Machine == "" {
			continue
		}
		switch ev.Status {
		case rollout.StatusLeasing:
			if open != "" {
				t.Errorf("%s started while %s was not done", ev.App, open)
			}
			open = ev.App
			order = append(order, ev.App)
		case rollout.StatusDone:
			open = ""
		}
	}
	want := []string{"purrfly-relay-a", "purrfly-relay-b", "purrfly-balancer"}
	if !equal(order, want) {
		t.Errorf("deploy order %v, want %v", order, want)
	}
}

// checkProgress: every machine's waits show what they wait for and until
// when: its start and healthy time, and relay-b's drain (the busy room
// keeps it waiting until its deadline). A progress event keeps the status
// of its machine's state event before it.
func checkProgress(t *testing.T, events []rollout.Event) {
	t.Helper()
	seen := map[string]bool{}
	status := map[string]rollout.Status{}
	for _, ev := range events {
		if ev.Wait == "" {
			status[ev.Machine] = ev.Status
			continue
		}
		seen[ev.App+" "+ev.Wait] = true
		if ev.Message == "" || !ev.Until.After(ev.Time.Add(-time.Second)) || ev.Status != status[ev.Machine] {
			t.Errorf("progress event %+v (the machine was %s)", ev, status[ev.Machine])
		}
	}
	want := []string{"purrfly-relay-b " + rollout.WaitDrain}
	for _, app := range []string{"purrfly-relay-a", "purrfly-relay-b", "purrfly-balancer"} {
		want = append(want, app+" "+rollout.WaitStarted, app+" "+rollout.WaitHealthy)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no progress event %q", w)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ping reads /ping of one machine through its app's proxy.
func ping(t *testing.T, f *fleet, app, id string) wire.Ping {
	t.Helper()
	url := f.sim.AppURL(app)
	p, _, err := client.NewBalancer(url).WithHeader(wire.HeaderFlyForceInstance, id).Ping(context.Background(), url)
	if err != nil || p.BootID == "" {
		t.Fatalf("ping %s %s: %+v %v", app, id, p, err)
	}
	return p
}

// sampler pings every relay machine concurrently, round after round, and
// remembers the rounds in which more than one did not answer.
type sampler struct {
	stopc  chan struct{}
	done   chan struct{}
	rounds int
	down   []time.Time
}

func startSampler(t *testing.T, f *fleet) *sampler {
	s := &sampler{stopc: make(chan struct{}), done: make(chan struct{})}
	ids := map[string]string{}
	for _, app := range f.apps[:2] {
		ids[app] = f.machine(t, app).ID
	}
	hc := &struct{ b map[string]*client.Balancer }{b: map[string]*client.Balancer{}}
	for app, id := range ids {
		url := f.sim.AppURL(app)
		hc.b[app] = (&client.Balancer{BaseURL: url, HTTP: f.hc, Timeout: 2 * time.Second}).WithHeader(wire.HeaderFlyForceInstance, id)
	}
	go func() {
		defer close(s.done)
		for i := 0; i < 5000; i++ {
			select {
			case <-s.stopc:
				return
			case <-time.After(25 * time.Millisecond):
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			n := 0
			at := time.Now() // wall clock: when a round of real pings saw relays down (reported only)
			for app, b := range hc.b {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p, _, err := b.Ping(context.Background(), f.sim.AppURL(app))
					if err != nil || p.BootID == "" {
						mu.Lock()
						n++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			s.rounds++
			if n > 1 {
				s.down = append(s.down, at)
			}
		}
	}()
	return s
}

func (s *sampler) stop() []time.Time {
	close(s.stopc)
	<-s.done
	return s.down
}

// busyRoom is a room with a connected host and client.
type busyRoom struct {
	host    *client.Host
	client  *client.Client
	id      wire.ConnID
	readers sync.WaitGroup
}

// readUntilClosed keeps both ends reading (as a game does), so the relay's
// close handshake at shutdown is answered.
func (r *busyRoom) readUntilClosed() {
	r.readers.Add(2)
	go func() {
		defer r.readers.Done()
		for i := 0; i < 1000; i++ {
			if _, err := r.host.Next(context.Background()); err != nil {
				return
			}
		}
	}()
	go func() {
		defer r.readers.Done()
		for i := 0; i < 1000; i++ {
			if _, err := r.client.Recv(context.Background()); err != nil {
				return
			}
		}
	}()
}

// openRoom allocates a room in region and connects a host and a client.
func openRoom(t *testing.T, ctx context.Context, f *fleet, region string) *busyRoom {
	t.Helper()
	b := &client.Balancer{BaseURL: f.env.Balancer.URL, HTTP: f.hc}
	name := "busy-" + region
	testutil.Eventually(t, 10*time.Second, "both relays to register", func() bool {
		insts, err := b.Instances(ctx, simSecret)
		return err == nil && len(insts) == 2
	})
	var hc wire.Capability
	var err error
	testutil.Eventually(t, 10*time.Second, "a relay in "+region+" to take a room", func() bool {
		hc, err = b.Allocate(ctx, region, name, client.NewAllocationID())
		return err == nil
	})
	h, err := client.DialHost(ctx, hc, name, &client.DialOptions{HTTPClient: f.hc})
	if err != nil {
		t.Fatal(err)
	}
	jc, err := b.Join(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.DialClient(ctx, jc, name, &client.DialOptions{HTTPClient: f.hc})
	if err != nil {
		h.CloseNow()
		t.Fatal(err)
	}
	r := &busyRoom{host: h, client: c}
	p, err := h.Next(ctx)
	if err != nil || p.Type != wire.ToHostConnected || len(p.IDs) != 1 {
		r.close()
		t.Fatalf("host did not see the client: %+v %v", p, err)
	}
	r.id = p.IDs[0]
	// The balancer counts the room's connections from the relay's
	// publications: wait until it sees them (drain watches that count).
	testutil.Eventually(t, 10*time.Second, "the balancer to count the busy room", func() bool {
		insts, err := b.Instances(ctx, simSecret)
		if err != nil {
			return false
		}
		for _, in := range insts {
			if in.Region == region && in.Rooms == 1 && in.Connections >= 1 {
				return true
			}
		}
		return false
	})
	return r
}

// roundTrip sends host -> client and client -> host once.
func (r *busyRoom) roundTrip(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.host.SendOne(ctx, r.id, []byte("ping")); err != nil {
		return err
	}
	got, err := r.client.Recv(ctx)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, []byte("ping")) {
		return errUnexpected
	}
	if err := r.client.Send(ctx, []byte("pong")); err != nil {
		return err
	}
	p, err := r.host.Next(ctx)
	if err != nil {
		return err
	}
	if p.Type != wire.ToHostData || !bytes.Equal(p.Payload, []byte("pong")) {
		return errUnexpected
	}
	return nil
}

func (r *busyRoom) close() {
	r.client.CloseNow()
	r.host.CloseNow()
	r.readers.Wait()
}

var errUnexpected = &wire.Error{Code: "unexpected", Message: "unexpected packet"}

// testWriter sends output to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}
