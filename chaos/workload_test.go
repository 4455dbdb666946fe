package chaos

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/wire"
)

// TestRoomEndedByFaultClosesItsSockets: a relay that dies (SIGKILL) ends
// its sockets without a close frame. The host and players of such a room
// see a read error, and the workload must then close them: coder/websocket
// keeps the descriptor open (CLOSE-WAIT) until Close, and a dropped
// *websocket.Conn is never finalized, so each killed relay leaked its
// rooms' sockets in the soak's own process.
func TestRoomEndedByFaultClosesItsSockets(t *testing.T) {
	const players = 3
	type relayConn struct {
		raw    *net.TCPConn
		closed chan error // nil once our side saw the client close, else why not
	}
	var (
		cut      = make(chan struct{}) // the "kill": every relay socket half-closed
		conns    = make(chan *relayConn, players+1)
		killed   atomic.Bool
		handlers sync.WaitGroup
	)
	type rawKey struct{}
	relay := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		raw := r.Context().Value(rawKey{}).(*net.TCPConn)
		defer raw.Close()
		if _, _, err := ws.Read(r.Context()); err != nil { // the authentication message
			return
		}
		if err := ws.Write(r.Context(), websocket.MessageBinary, []byte{wire.Authenticated}); err != nil {
			return
		}
		rc := &relayConn{raw: raw, closed: make(chan error, 1)}
		conns <- rc
		<-cut
		// As a killed relay's kernel does: FIN, no close frame. Our read
		// side stays open, so the client's own close shows up as EOF.
		if err := raw.CloseWrite(); err != nil {
			rc.closed <- err
			return
		}
		_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
		// A player may still send before it notices; a close with
		// something unread (a reset) is a close all the same.
		_, err = io.Copy(io.Discard, raw)
		if errors.Is(err, syscall.ECONNRESET) {
			err = nil
		}
		rc.closed <- err
	}))
	relay.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, rawKey{}, c)
	}
	relay.Start()
	defer relay.Close()
	defer handlers.Wait()
	u, _ := url.Parse(relay.URL)
	port, _ := strconv.Atoi(u.Port())
	capability := wire.Capability{Host: "127.0.0.1", Port: port, UDPPortV2: port, Secret: "s"}

	balancer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/allocate_ws" && r.Method == http.MethodPost,
			r.URL.Path == "/join" && !killed.Load():
			wire.WriteJSON(w, http.StatusOK, capability)
		default:
			wire.WriteError(w, wire.ErrRoomNotFound)
		}
	}))
	defer balancer.Close()

	f := &fleet{balancer: "balancer", st: flysim.State{Apps: map[string]flysim.AppState{"balancer": {URL: balancer.URL}}}}
	led := newLedger(func(string) {})
	w := newWorkload(f, nil, led, Options{Players: players, RoomLifetime: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	played := make(chan struct{})
	go func() {
		defer close(played)
		w.play(ctx, rand.New(rand.NewPCG(1, 1)), "leak-room", "ams")
	}()

	var got []*relayConn
	for len(got) < players+1 {
		select {
		case rc := <-conns:
			got = append(got, rc)
		case <-played:
			close(cut)
			t.Fatalf("the room ended with %d of its %d sockets connected: %v", len(got), players+1, led.counts)
		}
	}
	killed.Store(true)
	close(cut)
	<-played
	w.wait()

	for i, rc := range got {
		if err := <-rc.closed; err != nil {
			t.Errorf("socket %d (host first) still open on the client's side after its room ended: %v", i, err)
		}
	}
	if led.counts["rooms_ended_by_faults"] != 1 || len(led.details) != 0 {
		t.Errorf("counts %v, violations %v", led.counts, led.details)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the room outlived the test's bound")
	}
}
