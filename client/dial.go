package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// DefaultDialTimeout bounds connecting and authenticating when the caller's
// context has no deadline.
const DefaultDialTimeout = 10 * time.Second

// ReadLimit is the largest message Host, Client and Pipe accept: exactly
// wire.MaxMessageSize (65,535 bytes), as PurrNet's own socket does. A relay
// never sends more: it drops a client payload whose [2][sender:4] framing
// would pass it. A larger message closes the connection with
// StatusMessageTooBig.
const ReadLimit = wire.MaxMessageSize

// WebSocket close statuses callers check with CloseStatus.
const (
	StatusNormalClosure   = int(websocket.StatusNormalClosure)   // 1000
	StatusGoingAway       = int(websocket.StatusGoingAway)       // 1001
	StatusPolicyViolation = int(websocket.StatusPolicyViolation) // 1008
	StatusMessageTooBig   = int(websocket.StatusMessageTooBig)   // 1009
	StatusServiceRestart  = int(websocket.StatusServiceRestart)  // 1012: relay drained
)

// Errors of the relay connection.
var (
	// ErrAuthFailed: the relay answered 4 to the authentication message.
	ErrAuthFailed = errors.New("relay refused authentication")
	// ErrUnexpectedReply: the relay's first answer was neither 3 nor 4 (or,
	// for a pipe, not [5][id:4]).
	ErrUnexpectedReply = errors.New("unexpected relay reply to authentication")
	// ErrTooLarge: a write would exceed wire.MaxMessageSize; nothing was sent.
	ErrTooLarge = errors.New("message larger than 65,535 bytes")
	// ErrTextFrame: the relay sent a text message; PurrNet uses binary only.
	ErrTextFrame = errors.New("relay sent a text message")
	// ErrBufferTooSmall: NextInto or RecvInto got a message longer than the
	// buffer; the message was consumed and dropped.
	ErrBufferTooSmall = errors.New("message longer than the buffer")
)

// CloseStatus returns the WebSocket close status carried by err (for example
// StatusServiceRestart when a relay drained), or -1 if err holds none.
func CloseStatus(err error) int { return int(websocket.CloseStatus(err)) }

// DialOptions tunes a relay connection. A nil *DialOptions means defaults.
type DialOptions struct {
	// URL overrides the WebSocket URL derived from the capability (for
	// example a relay's WSURL() in tests, or its main HTTP port). With URL
	// set, the capability only supplies the secret and is not validated.
	URL string
	// NoSessionHint leaves out ?s=<hex(room)>, the affinity routing hint
	// that lets a multi-machine relay app hand the connection to the
	// machine holding the room before the upgrade. The Go client sends it
	// by default; PurrNet's own client does not, so set this to connect
	// exactly like PurrNet.
	NoSessionHint bool
	// HTTPHeader is added to the upgrade request (for example
	// fly-force-instance-id).
	HTTPHeader http.Header
	// HTTPClient dials the upgrade request; nil means http.DefaultClient.
	HTTPClient *http.Client
	// NAT sets "nat": true in the authentication message (UDP clients only
	// in PurrNet; here for tests).
	NAT bool
	// ProvisionalHostSecret is sent by a host being promoted by migration.
	ProvisionalHostSecret string
	// Transport is TransportWebSocket (default), TransportUDP (LiteNetLib
	// 2.x to the first IPv4 address of the capability's host at its
	// udpPortV2, as PurrNet's desktop builds connect) or TransportUDP1
	// (LiteNetLib 1.x at its udpPort, as older builds connect). URL, NoSessionHint,
	// HTTPHeader and HTTPClient are WebSocket's; UDPAddr is UDP's.
	Transport Transport
	// UDPAddr overrides the UDP address (ip:port) derived from the
	// capability; with it the capability only supplies the secret.
	UDPAddr string
	// UDPFlush lets what a UDP connection sends wait up to this long and
	// leave merged in one datagram, as PurrNet's client sends once per
	// network tick (LiteNetLib in manual mode). Zero sends at once.
	UDPFlush time.Duration
	// UDPArrivals has the kernel stamp each datagram's arrival (Linux), for
	// the arrival times OnMessage and OnEvent hand over: a load generator
	// times the relay without its own scheduling (purrctl bench).
	UDPArrivals bool
}

// RelayURL returns the WebSocket URL PurrNet connects to for a capability:
// ws://host:port, or wss:// when SSL is set, with an empty path and no query.
// A default port (80 for ws, 443 for wss) is left out, as .NET's UriBuilder
// does.
func RelayURL(c wire.Capability) (string, error) {
	host := strings.TrimSpace(c.Host)
	if host == "" || strings.ContainsAny(host, "/?#@ \\") {
		return "", fmt.Errorf("invalid relay host %q", host)
	}
	if c.Port < 1 || c.Port > 65535 {
		return "", fmt.Errorf("invalid relay port %d", c.Port)
	}
	scheme, def := "ws", 80
	if c.SSL {
		scheme, def = "wss", 443
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	authority := net.JoinHostPort(host, strconv.Itoa(c.Port))
	if c.Port == def {
		authority = host
		if strings.Contains(host, ":") {
			authority = "[" + host + "]"
		}
	}
	u := &url.URL{Scheme: scheme, Host: authority}
	if _, err := url.Parse(u.String()); err != nil || u.Hostname() != host {
		return "", fmt.Errorf("invalid relay host %q", host)
	}
	return u.String(), nil
}

// AuthMessage returns the authentication message PurrTransport sends for a
// host or client: {"roomName":…,"clientSecret":…,"nat":false}, field order
// and spelling as Unity's JsonUtility writes them, no HTML escaping.
func AuthMessage(room, secret string, nat bool) []byte {
	return authJSON(authMessage{RoomName: room, ClientSecret: secret, NAT: nat})
}

// PipeAuthJSON is the authentication message of a pipe peer.
const PipeAuthJSON = `{"pipe":true}`

type authMessage struct {
	RoomName              string `json:"roomName"`
	ClientSecret          string `json:"clientSecret"`
	NAT                   bool   `json:"nat"`
	ProvisionalHostSecret string `json:"provisionalHostSecret,omitempty"`
}

func authJSON(a authMessage) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(a) // strings and a bool cannot fail
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// roomURL picks the URL for a room connection and adds the session hint.
func roomURL(c wire.Capability, room string, opts *DialOptions) (string, error) {
	raw := opts.URL
	if raw == "" {
		var err error
		if raw, err = RelayURL(c); err != nil {
			return "", err
		}
	}
	if opts.NoSessionHint {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("invalid relay URL: %w", err)
	}
	q := u.Query()
	q.Set(wire.SessionQueryParam, wire.SessionID(room).Hint())
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// dialWS opens the WebSocket with the read limit set.
func dialWS(ctx context.Context, rawURL string, opts *DialOptions, limit int64) (*websocket.Conn, error) {
	ws, resp, err := websocket.Dial(ctx, rawURL, &websocket.DialOptions{
		HTTPClient: opts.HTTPClient,
		HTTPHeader: opts.HTTPHeader,
	})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("failed to connect to relay %s (HTTP %d): %w", redactURL(rawURL), resp.StatusCode, err)
		}
		return nil, fmt.Errorf("failed to connect to relay %s: %w", redactURL(rawURL), err)
	}
	ws.SetReadLimit(limit)
	return ws, nil
}

// authenticate dials rawURL (a WebSocket), sends auth and returns the
// connection with the relay's first answer. On any failure the connection
// is closed.
func authenticate(ctx context.Context, rawURL string, auth []byte, opts *DialOptions) (link, []byte, string, error) {
	if opts == nil {
		opts = &DialOptions{}
	}
	ctx, cancel := dialContext(ctx)
	defer cancel()
	ws, err := dialWS(ctx, rawURL, opts, ReadLimit)
	if err != nil {
		return nil, nil, "", err
	}
	return exchangeAuth(ctx, wsLink{ws}, auth)
}

// exchangeAuth sends the authentication message (ReliableOrdered over UDP,
// as PurrTransport) and returns the relay's answer. A NAT introduction
// ([6][token], for {"nat":true}) may come first; its token is returned.
func exchangeAuth(ctx context.Context, l link, auth []byte) (link, []byte, string, error) {
	if err := l.write(ctx, wire.ReliableOrdered, auth); err != nil {
		l.closeNow()
		return nil, nil, "", fmt.Errorf("failed to send authentication: %w", err)
	}
	var token string
	for {
		_, reply, err := l.read(ctx)
		if err != nil {
			l.closeNow()
			if errors.Is(err, ErrTextFrame) {
				return nil, nil, "", fmt.Errorf("failed to authenticate: %w", ErrTextFrame)
			}
			return nil, nil, "", fmt.Errorf("failed to read authentication reply: %w", err)
		}
		if len(reply) == 1 && reply[0] == wire.AuthFailed {
			l.closeNow()
			return nil, nil, "", fmt.Errorf("failed to authenticate: %w", ErrAuthFailed)
		}
		if len(reply) > 1 && reply[0] == wire.ToHostNATIntroduce && token == "" {
			token = string(reply[1:])
			continue
		}
		return l, reply, token, nil
	}
}

// dialLink connects to the relay of capability c for room over the
// transport opts asks for and authenticates with auth.
func dialLink(ctx context.Context, c wire.Capability, room string, auth []byte, opts *DialOptions) (link, []byte, string, error) {
	if !opts.Transport.UDP() {
		u, err := roomURL(c, room, opts)
		if err != nil {
			return nil, nil, "", fmt.Errorf("failed to connect: %w", err)
		}
		return authenticate(ctx, u, auth, opts)
	}
	ctx, cancel := dialContext(ctx)
	defer cancel()
	to, err := udpTarget(ctx, c, opts)
	if err != nil {
		return nil, nil, "", fmt.Errorf("failed to connect: %w", err)
	}
	l, err := dialUDP(ctx, to, opts.Transport, opts.UDPFlush, opts.UDPArrivals)
	if err != nil {
		return nil, nil, "", err
	}
	return exchangeAuth(ctx, l, auth)
}

// authRoom authenticates a host or client connection: reply must be [3].
func authRoom(ctx context.Context, c wire.Capability, room string, opts *DialOptions) (link, string, error) {
	if opts == nil {
		opts = &DialOptions{}
	}
	if room == "" {
		return nil, "", errors.New("failed to connect: empty room name")
	}
	if opts.URL == "" && opts.UDPAddr == "" {
		if err := ValidateCapability(c); err != nil {
			return nil, "", fmt.Errorf("failed to connect: %w", err)
		}
	}
	auth := authJSON(authMessage{RoomName: room, ClientSecret: c.Secret, NAT: opts.NAT,
		ProvisionalHostSecret: opts.ProvisionalHostSecret})
	l, reply, token, err := dialLink(ctx, c, room, auth, opts)
	if err != nil {
		return nil, "", err
	}
	if len(reply) != 1 || reply[0] != wire.Authenticated {
		l.closeNow()
		return nil, "", fmt.Errorf("failed to authenticate: %w (%d bytes, first %#x)", ErrUnexpectedReply, len(reply), firstByte(reply))
	}
	return l, token, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// readInto reads one binary message into buf and returns its length. A
// message longer than buf is drained and reported as ErrBufferTooSmall.
func readInto(ctx context.Context, ws *websocket.Conn, buf []byte) (int, error) {
	typ, r, err := ws.Reader(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		if n == len(buf) {
			var one [1]byte
			m, err := r.Read(one[:])
			if m > 0 {
				drain(r)
				return 0, ErrBufferTooSmall
			}
			if err != nil {
				return checkEOF(typ, n, err)
			}
			continue
		}
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return checkEOF(typ, n, err)
		}
	}
}

func checkEOF(typ websocket.MessageType, n int, err error) (int, error) {
	if !errors.Is(err, io.EOF) {
		return 0, err
	}
	if typ != websocket.MessageBinary {
		return 0, ErrTextFrame
	}
	return n, nil
}

// readMessage reads one binary message into a new slice.
func readMessage(ctx context.Context, ws *websocket.Conn) ([]byte, error) {
	typ, b, err := ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageBinary {
		return nil, ErrTextFrame
	}
	return b, nil
}

func le32(b []byte) wire.ConnID { return wire.ConnID(binary.LittleEndian.Uint32(b)) }

// drain reads r to its end (bounded by the connection's read limit).
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, r) }

// dialContext bounds a dial by DefaultDialTimeout when ctx has no deadline
// of its own.
func dialContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultDialTimeout)
}
