package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestConcurrentAllocationOneWinner: 50 hosts allocate one room name at the
// same instant with different allocation ids; exactly one wins, every other
// gets 409 room_name_taken, one room exists and the winner hosts it.
func TestConcurrentAllocationOneWinner(t *testing.T) {
	s := startDev(t, nil)
	const n = 50
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  []wire.Capability
		other []error
	)
	for i := 0; i < n; i++ {
		wg.Go(func() {
			<-start
			region := []string{"eu", "us", ""}[i%3]
			c, err := s.api.Allocate(tctx(t), region, "contested", client.NewAllocationID())
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins = append(wins, c)
			} else {
				other = append(other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d allocations won, want exactly 1 (errors: %v)", len(wins), other)
	}
	for _, err := range other {
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != "room_name_taken" || we.Status != http.StatusConflict {
			t.Errorf("losing allocation: %v, want 409 room_name_taken", err)
		}
	}
	checkOneRoom(t, s.api, s.relays, "contested")
	h, err := client.DialHost(tctx(t), wins[0], "contested", nil)
	if err != nil {
		t.Fatalf("the winner cannot host: %v", err)
	}
	defer h.CloseNow()
	cl := joinClient(t, s.api, "contested")
	roundTrip(t, h, cl, expectConnected(t, h)[0], "winner")
}

// TestManyClientsManyRooms: 200 clients in 20 rooms (over two relays) talk
// to their hosts at once: every client packet reaches its own host under
// the id the host was told on connect, every host reply reaches exactly the
// client it was sent to, in order, and nothing crosses rooms.
func TestManyClientsManyRooms(t *testing.T) {
	s := startDev(t, nil)
	const rooms, perRoom, msgs = 20, 10, 5
	type roomState struct {
		o   *open
		cls []*client.Client
	}
	rs := make([]*roomState, rooms)
	var g errgroup.Group
	g.SetLimit(8)
	for r := 0; r < rooms; r++ {
		rs[r] = &roomState{o: allocHost(t, s.api, []string{"eu", "us"}[r%2], roomName("crowd", r)), cls: make([]*client.Client, perRoom)}
		for c := 0; c < perRoom; c++ {
			g.Go(func() error {
				capab, err := s.api.Join(tctx(t), rs[r].o.name)
				if err != nil {
					return err
				}
				cl, err := client.DialClient(tctx(t), capab, rs[r].o.name, nil)
				if err != nil {
					return err
				}
				t.Cleanup(func() { _ = cl.CloseNow() })
				rs[r].cls[c] = cl
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	var run errgroup.Group
	for r, st := range rs {
		// Host: learn ids from connect notices, check each client's
		// packets come under one announced id, echo every packet back.
		run.Go(func() error {
			announced := map[wire.ConnID]bool{}
			idOf := map[byte]wire.ConnID{}
			got := 0
			for got < perRoom*msgs {
				p, err := st.o.host.Next(tctx(t))
				if err != nil {
					return fmt.Errorf("host %d: %w", r, err)
				}
				switch p.Type {
				case wire.ToHostConnected:
					for _, id := range p.IDs {
						announced[id] = true
					}
				case wire.ToHostData:
					from := p.IDs[0]
					if len(p.Payload) != 4 || p.Payload[0] != byte(r) {
						return fmt.Errorf("host %d got a packet of room %d: %v", r, p.Payload[0], p.Payload)
					}
					c := p.Payload[1]
					if !announced[from] {
						return fmt.Errorf("host %d: data from %d, never announced", r, from)
					}
					if prev, ok := idOf[c]; ok && prev != from {
						return fmt.Errorf("host %d: client %d changed id %d -> %d", r, c, prev, from)
					}
					idOf[c] = from
					reply := append([]byte{'e'}, p.Payload...)
					if err := st.o.host.SendOne(tctx(t), from, reply); err != nil {
						return err
					}
					got++
				default:
					return fmt.Errorf("host %d: unexpected packet type %d", r, p.Type)
				}
			}
			if len(announced) != perRoom || len(idOf) != perRoom {
				return fmt.Errorf("host %d: %d ids announced, %d clients spoke; want %d", r, len(announced), len(idOf), perRoom)
			}
			return nil
		})
		for c, cl := range st.cls {
			run.Go(func() error {
				for m := 0; m < msgs; m++ {
					if err := cl.Send(tctx(t), []byte{byte(r), byte(c), byte(m), 0x5a}); err != nil {
						return err
					}
				}
				for m := 0; m < msgs; m++ {
					b, err := cl.Recv(tctx(t))
					if err != nil {
						return fmt.Errorf("client %d/%d: %w", r, c, err)
					}
					if want := []byte{'e', byte(r), byte(c), byte(m), 0x5a}; !bytes.Equal(b, want) {
						return fmt.Errorf("client %d/%d got %v, want %v", r, c, b, want)
					}
				}
				return nil
			})
		}
	}
	if err := run.Wait(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, stepTimeout, "counts of 220 connections", func() bool {
		n, err := s.api.TotalConnections(tctx(t))
		return err == nil && n == rooms*(perRoom+1)
	})
}

// TestConcurrentExactReplays: one host's retries racing each other (same
// allocation id, 20 at once) all get the same capability and make one room.
func TestConcurrentExactReplays(t *testing.T) {
	s := startDev(t, nil)
	id := client.NewAllocationID()
	const n = 20
	caps := make([]wire.Capability, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			<-start
			caps[i], errs[i] = s.api.Allocate(tctx(t), "eu", "retried", id)
		})
	}
	close(start)
	wg.Wait()
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("replay %d: %v", i, errs[i])
		}
		if caps[i] != caps[0] {
			t.Fatalf("replay %d answered another capability than replay 0", i)
		}
	}
	checkOneRoom(t, s.api, s.relays, "retried")
}
