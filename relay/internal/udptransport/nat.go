package udptransport

import (
	"net/netip"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/litenet"
)

// NAT introduction. When a host and a client of a room both ask for it and
// both are UDP peers of this machine, the core sends both [6][token] and
// registers the token here with the two peers' addresses. Each then sends LiteNetLib
// NatIntroduceRequests with the token from the same socket as its relay
// connection, every 0.5 s for up to 6 s; a request from the other side's
// address pairs them, and the relay answers each with the other's
// internal and external addresses. Unlike PurrLay, which pairs any two
// requests with the same token, a token is honoured only from the two
// addresses it was issued to, so nobody can make the relay send
// introductions to a third party. Tokens and half pairs expire after
// natTokenTTL (PurrLay: 20 s); the table is bounded.
const (
	natTokenTTL  = 20 * time.Second
	natMaxTokens = 8192
)

// natEntry is one issued token.
type natEntry struct {
	host, client netip.AddrPort
	expires      time.Time
	// half is the first request of a pair (its sender's internal address),
	// waiting for the other side.
	half     netip.AddrPort // the sender
	halfIn   netip.AddrPort // its internal address
	halfWhen time.Time
}

// natTable holds the issued tokens.
type natTable struct {
	clk    clock.Clock // static
	mu     lockrank.Mutex
	tokens map[string]*natEntry // guarded by mu
}

func (t *natTable) init(c clock.Clock) {
	t.clk = c
	t.mu.Class = lockrank.NATTable
	t.tokens = make(map[string]*natEntry)
}

// expect issues token for a host and a client at these addresses.
func (t *natTable) expect(token string, host, client netip.AddrPort) {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.tokens) >= natMaxTokens {
		t.sweepLocked(now)
		if len(t.tokens) >= natMaxTokens {
			return // full of live tokens: the peers stay relayed
		}
	}
	t.tokens[token] = &natEntry{host: host, client: client, expires: now.Add(natTokenTTL)}
}

// request handles one introduce request from address from.
func (t *natTable) request(ep *litenet.Endpoint, from, internal netip.AddrPort, token []byte) {
	now := t.clk.Now()
	t.mu.Lock()
	e := t.tokens[string(token)]
	if e == nil || now.After(e.expires) || from != e.host && from != e.client {
		t.mu.Unlock()
		return
	}
	if !e.half.IsValid() || e.half == from || now.Sub(e.halfWhen) > natTokenTTL {
		e.half, e.halfIn, e.halfWhen = from, internal, now // the first of a pair (or a repeat)
		t.mu.Unlock()
		return
	}
	hostIn, clientIn := e.halfIn, internal
	if from == e.host {
		hostIn, clientIn = internal, e.halfIn
	}
	host, client := e.host, e.client
	e.half = netip.AddrPort{}
	t.mu.Unlock()
	ep.NatIntroduce(hostIn, host, clientIn, client, token)
}

// sweep forgets expired tokens (the cleanup tick).
func (t *natTable) sweep() {
	now := t.clk.Now()
	t.mu.Lock()
	t.sweepLocked(now)
	t.mu.Unlock()
}

func (t *natTable) sweepLocked(now time.Time) {
	for k, e := range t.tokens {
		if now.After(e.expires) {
			delete(t.tokens, k)
		}
	}
}
