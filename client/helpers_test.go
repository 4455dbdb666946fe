package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// testCtx returns a context bounded well under the package's time budget.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// seenRequest is what a fake balancer recorded of one request.
type seenRequest struct {
	Method, Path, Query string
	Header              http.Header
	ContentLength       int64
}

// fakeBalancer is a balancer double on 127.0.0.1 in front of a fakeRelay:
// /allocate_ws creates the room on the relay, /join answers its client
// credential. Handlers can be overridden per route.
type fakeBalancer struct {
	srv   *httptest.Server
	relay *fakeRelay
	// region is what /servers says the relay's region is (static).
	region string

	mu       sync.Mutex // guards the fields below
	seen     []seenRequest
	rooms    map[string]string // name -> client secret
	override map[string]http.HandlerFunc
}

func newFakeBalancer(t testing.TB, relay *fakeRelay, region string, override map[string]http.HandlerFunc) *fakeBalancer {
	t.Helper()
	b := &fakeBalancer{relay: relay, region: region, rooms: map[string]string{}, override: override}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *fakeBalancer) requests() []seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seenRequest(nil), b.seen...)
}

func (b *fakeBalancer) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.seen = append(b.seen, seenRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), r.ContentLength})
	h := b.override[r.URL.Path]
	b.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	switch r.URL.Path {
	case "/servers":
		host, port := b.relay.hostPort()
		wire.WriteJSON(w, 200, wire.ServersResponse{Servers: []wire.ServerInfo{{
			APIEndpoint: b.relay.srv.URL, Host: host, WebSocketsPort: port, UDPPortV2: 7778, Region: b.region}}})
	case "/allocate_ws":
		name := r.Header.Get("name")
		if name == "" {
			wire.WriteError(w, wire.ErrMissingHeader)
			return
		}
		hostSecret, clientSecret := "host-"+randHex(8), "client-"+randHex(8)
		b.relay.addRoom(name, hostSecret, clientSecret)
		b.mu.Lock()
		b.rooms[name] = clientSecret
		b.mu.Unlock()
		wire.WriteJSON(w, 200, b.relay.capability(hostSecret))
	case "/join":
		b.mu.Lock()
		secret, ok := b.rooms[r.Header.Get("name")]
		b.mu.Unlock()
		if !ok {
			wire.WriteError(w, wire.ErrRoomNotFound)
			return
		}
		wire.WriteJSON(w, 200, b.relay.capability(secret))
	default:
		wire.WriteError(w, wire.ErrNotFound)
	}
}

// wsServer runs fn for every WebSocket accepted on 127.0.0.1 and returns the
// server and its ws:// URL. fn's context ends when the test ends.
func wsServer(t testing.TB, fn func(ctx context.Context, c *websocket.Conn)) (*httptest.Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		fn(ctx, c)
	}))
	t.Cleanup(func() { cancel(); srv.Close(); wg.Wait() })
	return srv, "ws" + strings.TrimPrefix(srv.URL, "http")
}
