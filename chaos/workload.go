package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// Bounds of the workload's traffic.
const (
	sendEvery        = 200 * time.Millisecond // each player sends one message per tick
	maxMessagesRoom  = 100_000                // per room incarnation, whatever its lifetime
	maxIncarnations  = 10_000                 // per room slot over the whole soak
	allocateAttempts = 40                     // 500 ms apart: rides out a balancer restart
	maxLiveRooms     = 64                     // Options.Rooms is capped here
	maxPlayers       = 8                      // per room
)

// workload is the rooms playing through the storm: Options.Rooms slots,
// each playing one room incarnation after another (a fresh name each time,
// as a PurrNet host pressing Play). The live rooms map is guarded by mu;
// each room is owned by its slot goroutine except the atomic hostUp.
type workload struct {
	f     *fleet
	v     *views
	led   *ledger
	opts  Options
	api   *client.Balancer
	hc    *http.Client
	wg    sync.WaitGroup // slot goroutines and /join probers
	bound bounds

	mu   sync.Mutex
	live map[string]*liveRoom // rooms whose host is connected, by name
}

// liveRoom is one incarnation with its host connected.
type liveRoom struct {
	name string
	host *client.Host
	cap  wire.Capability // client capability (from /join)
	up   atomic.Bool     // the host's socket is open
	// pinned keeps the host in the room past its lifetime (a fault that
	// needs the room alive, rival.go).
	pinned atomic.Bool
}

func newWorkload(f *fleet, v *views, led *ledger, opts Options) *workload {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 5 * time.Second}}
	return &workload{f: f, v: v, led: led, opts: opts, hc: hc, bound: f.health,
		api:  &client.Balancer{BaseURL: f.st.Apps[f.balancer].URL, HTTP: hc, Timeout: 5 * time.Second},
		live: map[string]*liveRoom{}}
}

// socketBound is how long a dead room's player sockets may stay open after
// its host's closed: the relay's close grace (5 s) for the close
// handshake, plus the same again for scheduling on a loaded machine.
const socketBound = 10 * time.Second

// joinBound is how long /join may hand out a room nobody serves: the
// balancer removes a relay that stopped answering after HealthFailures
// probes, each at most one interval plus one timeout apart, and a relay
// cut from the balancer reports its removals within two heartbeats of
// the link healing.
func (w *workload) joinBound() time.Duration {
	b := w.bound
	return time.Duration(b.HealthFailures)*(b.HealthInterval+b.HealthTimeout) + 2*b.Heartbeat
}

// start launches the slots; they stop when ctx ends.
func (w *workload) start(ctx context.Context, seed uint64) {
	n := min(max(w.opts.Rooms, 1), maxLiveRooms)
	for i := 0; i < n; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
			for k := 0; k < maxIncarnations && ctx.Err() == nil; k++ {
				name := fmt.Sprintf("chaos-%d-%d-%d", seed, i, k)
				w.play(ctx, rng, name, w.opts.Regions[i%len(w.opts.Regions)])
			}
		}()
	}
}

func (w *workload) wait() { w.wg.Wait(); w.hc.CloseIdleConnections() }

// play runs one incarnation: allocate, host, players, traffic until its
// lifetime ends (the host leaves) or its host's socket closes, then the
// dead room's checks.
func (w *workload) play(ctx context.Context, rng *rand.Rand, name, region string) {
	hostCap, err := w.allocate(ctx, name, region)
	if err != nil {
		if ctx.Err() == nil {
			w.led.add("allocations_failed", 1)
			pause(ctx, 500*time.Millisecond)
		}
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	host, err := client.DialHost(dctx, hostCap, name, &client.DialOptions{HTTPClient: w.hc})
	cancel()
	if err != nil {
		w.led.add("host_connects_failed", 1)
		return
	}
	r := &liveRoom{name: name, host: host}
	r.up.Store(true)
	w.led.add("rooms_played", 1)
	hostDone := make(chan time.Time, 1)
	go w.echo(r, hostDone)

	lifetime := w.opts.RoomLifetime/2 + time.Duration(rng.Int64N(int64(w.opts.RoomLifetime)))
	players := w.joinPlayers(ctx, r)
	w.mu.Lock()
	w.live[name] = r
	w.mu.Unlock()

	var diedAt time.Time
	deliberate := false
	t := time.NewTimer(lifetime)
wait:
	for {
		select {
		case diedAt = <-hostDone:
			break wait
		case <-t.C:
			if r.pinned.Load() {
				t.Reset(time.Second)
				continue
			}
			deliberate = true
			break wait
		case <-ctx.Done():
			deliberate = true
			break wait
		}
	}
	t.Stop()
	w.mu.Lock()
	delete(w.live, name)
	w.mu.Unlock()
	if deliberate {
		_ = host.Close()
		diedAt = <-hostDone
		w.led.add("rooms_ended_by_host", 1)
	} else {
		// The relay is gone without a close frame (killed, or cut off by
		// the proxy): coder/websocket reports the read error but keeps
		// the socket open until it is closed, and a dropped *websocket.Conn
		// is never finalized, so release it here.
		_ = host.CloseNow()
		w.led.add("rooms_ended_by_faults", 1)
		w.wg.Add(1)
		go w.probeJoin(ctx, name, diedAt)
	}
	w.closePlayers(r, players, diedAt)
}

// allocate asks the balancer for the room, retrying (same allocation id,
// as PurrNet does) while the balancer cannot answer.
func (w *workload) allocate(ctx context.Context, name, region string) (wire.Capability, error) {
	id := client.NewAllocationID()
	var err error
	for i := 0; i < allocateAttempts && ctx.Err() == nil; i++ {
		var c wire.Capability
		if c, err = w.api.Allocate(ctx, region, name, id); err == nil {
			return c, nil
		}
		w.led.add("allocate_retries", 1)
		pause(ctx, 500*time.Millisecond)
	}
	return wire.Capability{}, fmt.Errorf("allocate %s: %w", name, err)
}

// echo is the host's reader: it sends every player's message back to that
// player, and reports when its socket closes.
func (w *workload) echo(r *liveRoom, done chan<- time.Time) {
	buf := make([]byte, client.ReadLimit)
	n := 0
	for {
		e, err := r.host.NextInto(context.Background(), buf)
		if err != nil {
			r.up.Store(false)
			done <- time.Now()
			return
		}
		if e.Type != wire.ToHostData || n >= maxMessagesRoom {
			continue
		}
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.host.SendOne(ctx, e.ID, e.Payload)
		cancel()
	}
}

// player is one client of a room: a sender loop and a reader that checks
// every echo and notes when its socket closed.
type player struct {
	c      *client.Client
	stop   chan struct{}
	closed chan time.Time // one value: when the reader saw the socket close
}

// joinPlayers connects the room's players through /join.
func (w *workload) joinPlayers(ctx context.Context, r *liveRoom) []*player {
	var out []*player
	for i := 0; i < min(max(w.opts.Players, 0), maxPlayers); i++ {
		jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		jc, err := w.api.Join(jctx, r.name)
		if err == nil {
			r.cap = jc
			var c *client.Client
			if c, err = client.DialClient(jctx, jc, r.name, &client.DialOptions{HTTPClient: w.hc}); err == nil {
				p := &player{c: c, stop: make(chan struct{}), closed: make(chan time.Time, 1)}
				go w.read(r, p, i)
				go w.send(p, i)
				out = append(out, p)
			}
		}
		cancel()
		if err != nil {
			w.led.add("player_connects_failed", 1)
		}
	}
	return out
}

func (w *workload) send(p *player, i int) {
	t := time.NewTicker(sendEvery)
	defer t.Stop()
	for seq := 0; seq < maxMessagesRoom; seq++ {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := p.c.Send(ctx, []byte("p"+strconv.Itoa(i)+"-"+strconv.Itoa(seq)))
		cancel()
		if err != nil {
			return
		}
	}
}

func (w *workload) read(r *liveRoom, p *player, i int) {
	prefix := []byte("p" + strconv.Itoa(i) + "-")
	for {
		b, err := p.c.Recv(context.Background())
		if err != nil {
			p.closed <- time.Now()
			return
		}
		if !bytes.HasPrefix(b, prefix) {
			w.led.violate(InvTraffic, r.name, "player %d got %q back", i, b)
			continue
		}
		w.led.add("messages_echoed", 1)
	}
}

// closePlayers checks that every player socket of a room whose host is gone
// is closed by the relay within socketBound, then closes them (a socket the
// relay ended without a close frame, as a killed relay does, stays open on
// our side until then).
func (w *workload) closePlayers(r *liveRoom, players []*player, diedAt time.Time) {
	deadline := time.NewTimer(time.Until(diedAt.Add(socketBound)))
	defer deadline.Stop()
	for i, p := range players {
		close(p.stop)
		select {
		case at := <-p.closed:
			w.led.observe("player_socket_close", at.Sub(diedAt))
			_ = p.c.CloseNow()
		case <-deadline.C:
			w.led.violate(InvSocketOpen, r.name, "player %d still connected %v after its host's socket closed", i, socketBound)
			_ = p.c.CloseNow()
			<-p.closed
			deadline.Reset(0)
		}
	}
}

// probeJoin watches /join for a room whose host's socket closed without
// the host leaving (its machine died or stopped): /join may hand it out
// while some machine still lists it, and for at most joinBound after no
// machine does.
func (w *workload) probeJoin(ctx context.Context, name string, diedAt time.Time) {
	defer w.wg.Done()
	bound := w.joinBound()
	end := diedAt.Add(bound + 5*time.Second)
	var unservedSince time.Time
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		jctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := w.api.Join(jctx, name)
		cancel()
		if errors.Is(err, wire.ErrRoomNotFound) {
			w.led.observe("join_after_death", time.Since(diedAt))
			return
		}
		if err != nil {
			continue // the balancer is down or faulted: it hands out nothing
		}
		served, ok := w.v.isServed(name, time.Now().Add(-2*viewEvery))
		switch {
		case !ok || served:
			unservedSince = time.Time{}
		case unservedSince.IsZero():
			unservedSince = time.Now()
		case time.Since(diedAt) > bound:
			w.led.violate(InvJoinUnserved, name, "/join still answers %v after its host's socket closed; no machine has served it for %v",
				time.Since(diedAt).Round(time.Millisecond), time.Since(unservedSince).Round(time.Millisecond))
			return
		}
	}
	w.led.add("dead_rooms_still_served", 1) // joinable but listed by a live machine: not a violation
}

// liveRooms is a snapshot of the rooms whose host is connected.
func (w *workload) liveRooms() []*liveRoom {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*liveRoom, 0, len(w.live))
	for _, r := range w.live {
		out = append(out, r)
	}
	return out
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
