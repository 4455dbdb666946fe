package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// fakeRelay is a tiny relay double for the client's tests: real WebSockets on
// 127.0.0.1, PurrNet framing, rooms with one host and its clients. It records
// what it received so tests can assert exact bytes. Behaviour knobs are set
// before start and never changed after.
type fakeRelay struct {
	// Knobs (static after newFakeRelay).
	authReply     []byte // if set, sent instead of the real reply to every auth
	silentAuth    bool   // never answer authentication
	rejectClients bool   // answer 4 to every non-host
	dropData      bool   // drop client -> host data
	senderOffset  uint32 // added to the sender id of client -> host data
	noDisconnect  bool   // do not tell the host that a client left
	textToClients bool   // deliver SEND_ONE payloads as text messages

	srv    *httptest.Server
	ctx    context.Context // cancelled by close: ends every handler
	cancel context.CancelFunc
	wg     sync.WaitGroup // handlers

	mu       sync.Mutex // guards the fields below
	rooms    map[string]*fakeRoom
	conns    map[*websocket.Conn]bool
	nextID   uint32
	auths    [][]byte        // every auth message, raw
	requests []*http.Request // upgrade requests (clones without body)
	hostMsgs [][]byte        // every message a host sent after auth
	tooBig   int             // reads that failed for size
}

type fakeRoom struct {
	hostSecret, clientSecret string
	host                     *websocket.Conn
	clients                  map[wire.ConnID]*websocket.Conn
}

func newFakeRelay(t testing.TB, knobs func(*fakeRelay)) *fakeRelay {
	t.Helper()
	r := &fakeRelay{rooms: map[string]*fakeRoom{}, conns: map[*websocket.Conn]bool{}}
	if knobs != nil {
		knobs(r)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.close)
	return r
}

func (r *fakeRelay) close() {
	r.cancel()
	r.mu.Lock()
	for c := range r.conns {
		c.CloseNow()
	}
	r.mu.Unlock()
	r.srv.Close()
	r.wg.Wait()
}

// addRoom creates a room with the given credentials.
func (r *fakeRelay) addRoom(name, hostSecret, clientSecret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rooms[name] = &fakeRoom{hostSecret: hostSecret, clientSecret: clientSecret, clients: map[wire.ConnID]*websocket.Conn{}}
}

// hostPort returns the relay's host and port.
func (r *fakeRelay) hostPort() (string, int) {
	h, p, _ := net.SplitHostPort(r.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return h, n
}

func (r *fakeRelay) capability(secret string) wire.Capability {
	h, p := r.hostPort()
	return wire.Capability{Host: h, Port: p, Secret: secret, UDPPortV2: 7778}
}

func (r *fakeRelay) wsURL() string {
	h, p := r.hostPort()
	return "ws://" + net.JoinHostPort(h, strconv.Itoa(p))
}

func (r *fakeRelay) snapshot() (auths [][]byte, reqs []*http.Request, hostMsgs [][]byte, tooBig int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.auths...), append([]*http.Request(nil), r.requests...),
		append([][]byte(nil), r.hostMsgs...), r.tooBig
}

// closeAll closes every connection with code (a drain).
func (r *fakeRelay) closeAll(code websocket.StatusCode) {
	r.mu.Lock()
	conns := make([]*websocket.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close(code, "drain") }()
	}
	wg.Wait()
}

func (r *fakeRelay) write(c *websocket.Conn, b []byte) {
	_ = c.Write(r.ctx, websocket.MessageBinary, b)
}

func (r *fakeRelay) serve(w http.ResponseWriter, req *http.Request) {
	r.wg.Add(1)
	defer r.wg.Done()
	c, err := websocket.Accept(w, req, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(wire.MaxMessageSize)
	r.mu.Lock()
	r.conns[c] = true
	r.requests = append(r.requests, req.Clone(context.Background()))
	r.mu.Unlock()
	defer func() { r.mu.Lock(); delete(r.conns, c); r.mu.Unlock() }()

	typ, auth, err := c.Read(r.ctx)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.auths = append(r.auths, auth)
	r.mu.Unlock()
	if typ != websocket.MessageBinary {
		c.Close(websocket.StatusUnsupportedData, "binary only")
		return
	}
	if r.silentAuth {
		<-r.ctx.Done()
		return
	}
	if r.authReply != nil {
		r.write(c, r.authReply)
		<-r.ctx.Done()
		return
	}
	var a wire.Auth
	if json.Unmarshal(auth, &a) != nil {
		r.write(c, []byte{wire.AuthFailed})
		return
	}
	if a.Pipe {
		r.servePipe(c)
		return
	}
	r.mu.Lock()
	room := r.rooms[a.RoomName]
	switch {
	case room != nil && a.ClientSecret == room.hostSecret && room.host == nil:
		room.host = c
		ids := make([]wire.ConnID, 0, len(room.clients))
		for id := range room.clients {
			ids = append(ids, id)
		}
		r.mu.Unlock()
		r.write(c, []byte{wire.Authenticated})
		if len(ids) > 0 {
			r.write(c, wire.AppendConnected(nil, ids...))
		}
		r.serveHost(c, room)
	case room != nil && a.ClientSecret == room.clientSecret && !r.rejectClients:
		r.nextID++
		id := wire.ConnID(r.nextID)
		room.clients[id] = c
		host := room.host
		r.mu.Unlock()
		r.write(c, []byte{wire.Authenticated})
		if host != nil {
			r.write(host, wire.AppendConnected(nil, id))
		}
		r.serveClient(c, room, id)
	default:
		r.mu.Unlock()
		r.write(c, []byte{wire.AuthFailed})
		c.Close(websocket.StatusPolicyViolation, "authentication failed")
	}
}

func (r *fakeRelay) readErr(err error) {
	if errors.Is(err, websocket.ErrMessageTooBig) {
		r.mu.Lock()
		r.tooBig++
		r.mu.Unlock()
	}
}

func (r *fakeRelay) serveHost(c *websocket.Conn, room *fakeRoom) {
	defer func() {
		r.mu.Lock()
		room.host = nil
		clients := room.clients
		room.clients = map[wire.ConnID]*websocket.Conn{}
		r.mu.Unlock()
		for _, cc := range clients {
			cc.CloseNow()
		}
	}()
	for {
		_, b, err := c.Read(r.ctx)
		if err != nil {
			r.readErr(err)
			return
		}
		r.mu.Lock()
		r.hostMsgs = append(r.hostMsgs, b)
		r.mu.Unlock()
		p, err := wire.ParseHostPacket(b)
		if err != nil {
			continue
		}
		r.mu.Lock()
		target := room.clients[p.Target]
		r.mu.Unlock()
		if target == nil {
			continue
		}
		switch p.Type {
		case wire.HostSendOne:
			if r.textToClients {
				_ = target.Write(r.ctx, websocket.MessageText, p.Payload)
			} else {
				r.write(target, p.Payload)
			}
		case wire.HostKick:
			target.Close(websocket.StatusPolicyViolation, "kicked")
		}
	}
}

func (r *fakeRelay) serveClient(c *websocket.Conn, room *fakeRoom, id wire.ConnID) {
	defer func() {
		r.mu.Lock()
		delete(room.clients, id)
		host := room.host
		r.mu.Unlock()
		if host != nil && !r.noDisconnect {
			r.write(host, wire.AppendDisconnected(nil, id))
		}
	}()
	for {
		_, b, err := c.Read(r.ctx)
		if err != nil {
			r.readErr(err)
			return
		}
		if len(b) <= 1 || r.dropData {
			continue
		}
		r.mu.Lock()
		host := room.host
		r.mu.Unlock()
		if host != nil {
			r.write(host, wire.AppendHostData(nil, id+wire.ConnID(r.senderOffset), b))
		}
	}
}

func (r *fakeRelay) servePipe(c *websocket.Conn) {
	r.mu.Lock()
	r.nextID++
	id := wire.ConnID(r.nextID)
	room := r.rooms[""]
	if room == nil {
		room = &fakeRoom{clients: map[wire.ConnID]*websocket.Conn{}}
		r.rooms[""] = room
	}
	room.clients[id] = c
	r.mu.Unlock()
	defer func() { r.mu.Lock(); delete(room.clients, id); r.mu.Unlock() }()
	r.write(c, wire.AppendPipeAuthenticated(nil, id))
	for {
		_, b, err := c.Read(r.ctx)
		if err != nil {
			r.readErr(err)
			return
		}
		target, data, err := wire.ParsePipe(b)
		if err != nil {
			continue
		}
		r.mu.Lock()
		tc := room.clients[target]
		r.mu.Unlock()
		if tc != nil {
			r.write(tc, wire.AppendPipe(nil, id, data))
		}
	}
}

// le32bytes is a test helper: the 4-byte little-endian form of id.
func le32bytes(id wire.ConnID) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(id)) }
