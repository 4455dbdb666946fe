// Package wstest has the WebSocket helpers that the relay's test packages
// share: a minimal PurrNet-speaking test peer over coder/websocket (Peer:
// dial, send, receive, authenticate, read a host packet, wait for the
// close; every wait bounded at 5 s), a reader of raw frames that unmasks
// by the RFC's definition, independent of the relay's own frame code
// (ReadRawFrame), and a masked client frame written by hand (MaskedFrame).
// It is for tests only (like internal/testutil): no production package
// imports it.
package wstest
