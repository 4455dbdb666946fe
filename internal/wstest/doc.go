// Package wstest has the WebSocket helpers that the relay's test packages
// share: a minimal PurrNet-speaking test peer over coder/websocket (Peer:
// dial, send, receive, authenticate, read a host packet, wait for the
// close), a reader of raw frames that unmasks by the RFC's definition,
// independent of the relay's own frame code (ReadRawFrame), a masked
// client frame written by hand (MaskedFrame), and both ends of a loopback
// TCP connection for a frame reader or writer to run over (TCPPair). Every
// wait is bounded at 5 s. It is for tests only (like internal/testutil):
// no production package imports it.
package wstest
