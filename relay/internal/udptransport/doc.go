// Package udptransport is the relay's UDP transport: PurrNet's desktop,
// mobile and Editor builds over LiteNetLib 2.x (package litenet), beside
// WebSocket; a second Transport (Config.Version) serves older builds over
// LiteNetLib 1.x on its own port, with the same code and no NAT
// introduction. Each LiteNetLib peer is one connection of the routing core
// (package core), in the same id space, rooms and limits as WebSocket
// peers; a room may mix both. No goroutine per peer: litenet's socket
// reader delivers every peer's messages (serialised per peer), and a
// flush pulls what the core queued for a peer (conn.flush) into
// LiteNetLib packets, merged, one sendmmsg for many peers: with no
// Config.Flush the reader's, right after the batch that woke the peer (a
// peer woken more often than Config.BusyWait waits up to that for the
// flusher), with a Config.Flush the flusher's, at most that long after
// the peer was woken.
//
// A message's delivery method comes out of PurrNet's UDP framing
// (package udpframe) before the core routes it, and a frame goes out with
// its method (buf.Buf.Method: the client's or host's, ReliableOrdered for
// the relay's own packets). LiteNetLib sends only ReliableOrdered and
// ReliableUnordered in several packets, so a ReliableSequenced frame
// longer than one packet goes ReliableOrdered (PurrLay upgrades it too)
// and an Unreliable or Sequenced one is dropped and counted
// (too_large_for_udp); PurrNet itself never sends those (it keeps 16 bytes
// of every packet for the relay's header).
//
// A peer's first message is its authentication. On a single machine it is
// handled on the reader at once. On a machine of a multi-machine app whose
// room may be elsewhere, looking the room up and dialling the holder can
// take seconds, which no socket reader may spend: that runs on a goroutine
// of the peer's own, and what the peer sends meanwhile waits (bounded) in
// arrival order. A peer that does not authenticate within the
// authentication timeout is dropped (litenet's PendingTimeout; the
// transport confirms a peer once it has a role).
//
// # Ownership
//
//   - Transport: its configuration is static after Listen; the endpoint
//     is set once litenet.Listen returns (its readers may call the Handler
//     before); the NAT tokens are guarded by natTable.mu.
//   - conn: its transport, peer and core connection are static after
//     Connected. litenet serialises a peer's Connected, Receive and
//     Disconnected (under litenet's Peer.rmu), which makes the socket
//     reader the connection's reader; while a routed first message runs,
//     its goroutine is the reader instead, and conn.mu guards the hand-over
//     (started, authing, early, left).
//
// Both locks are in the relay's lock order (the table in the doc of
// package internal/lockrank): conn.mu under litenet's Peer.rmu and above
// the core's room table (a first message looks its room up under it),
// natTable.mu a leaf under a room's lock.
package udptransport
