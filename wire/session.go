package wire

import "encoding/hex"

// SessionID is the key session affinity hashes: a string type holding the
// session's bytes. For a PurrNet room it is the room name.
type SessionID string

// MaxSessionIDLen bounds a session id (and so a room name) in bytes.
const MaxSessionIDLen = 128

// SessionQueryParam is the query parameter that carries the routing hint,
// the lower-case hex of the session id's bytes: ?s=<hex>.
const SessionQueryParam = "s"

// Hint returns the hex routing hint for the session.
func (s SessionID) Hint() string { return hex.EncodeToString([]byte(s)) }

// ParseSessionHint decodes a ?s= routing hint. An empty hint is no session.
func ParseSessionHint(h string) (SessionID, error) {
	if h == "" {
		return "", nil
	}
	if len(h) > 2*MaxSessionIDLen {
		return "", ErrBadSessionHint
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return "", ErrBadSessionHint
	}
	return SessionID(b), nil
}

// RouteResult is where a session is served, as a relay's Router decides it
// before an upgrade or an allocation: on this machine (Serve), or on the
// machine Instance names, which the relay answers with
// "Fly-Replay: instance=<Instance>" without upgrading. flyaffinity's
// rendezvous hashing and the relay's sticky router both answer it.
type RouteResult struct {
	Serve    bool
	Instance string
}
