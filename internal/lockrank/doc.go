// Package lockrank is the one lock order of the relay (relay/...) and
// litenet, written down once, and the checker that holds the tests to it.
//
// # The order
//
// A goroutine holding a lock may take only locks of a higher rank. Locks
// of the same rank never nest (two rooms, two peers, two leaves). The
// leaves (rank 100) are taken last: no ranked lock is taken under one.
//
//	rank  lock                               guards
//	 10   litenet socket.flushMu             a socket's flush: its batch, timer wheel and emitter; Handler.Flush runs under it
//	 20   litenet Peer.rmu                   a peer's Handler calls (Connected, Receive, Disconnected), in order; the relay routes under it
//	 30   udptransport conn.mu               a UDP peer's routed-authentication state (the first message, what waits behind it)
//	 40   wsframe Reader.mu                  reading an accepted WebSocket's frames (the reader, or the writer's close handshake)
//	 50   core room table shard              one shard of the name -> room map
//	 60   core Room.mu                       one room: phase, host, clients, secrets, migration state
//	 90   relay Server.mu                    the server's life-cycle flags (a retire call takes retirement.mu under it)
//	100   core Conn.mu                       one connection's queue, write side and close reason
//	100   core connection table shard        one shard of the id -> connection maps (every connection, the pipes)
//	100   wsframe Writer.own                 one socket's writes: whole frames, one owner at a time (handed off with a frame's rest)
//	100   wstransport conn.mu                a WebSocket's close grace timer
//	100   wstransport pendingPool.mu         the WebSocket connections not authenticated yet, oldest first
//	100   relay registrar.mu                 the dirty rooms and the unregister outbox
//	100   udptransport natTable.mu           the NAT introduction tokens
//	100   relay givenRooms.mu                the rooms handed over lately
//	100   relay locator.mu                   the room location cache
//	100   relay readiness.mu                 what the last heartbeat learnt
//	100   relay rawConns.mu                  the accepted TCP connections
//	100   relay retirement.mu                a retiring relay's latest stop and how its retirement ended
//	100   relay bootWatch.mu                 the balancer boot the registrar last registered with
//	100   litenet Peer.mu                    a peer's connection state: channels, timers, queues
//	100   litenet socket.dirtyMu             a socket's woken peers
//	100   litenet pendingTable.mu            the connections not confirmed yet
//	100   litenet peer table shard           one shard of the address -> peer map
//
// The arrows this allows and the code takes: litenet calls the relay's
// Handler under Peer.rmu (the relay routes a UDP peer's message, which
// takes the peer's conn.mu, room locks, connection locks and other peers'
// Peer.mu), and Handler.Flush under socket.flushMu (the relay drains a
// connection's queue into its peer); the frame reader writes its pongs and
// close frames under its mu; a room's lock is held while frames are queued
// on its connections and while they are closed (a WebSocket's conn.mu, a
// UDP peer's Peer.mu and socket.dirtyMu), while the registrar is told of a
// change, and while a NAT token is issued; an allocation holds a room
// table shard while it replaces a room. No lock of this table is held
// across I/O except the two that exist for it: Writer.own (a socket's
// write) and socket.flushMu (a socket's batch write).
//
// Locks outside the table (the injected test clock's, prometheus's,
// net/http's, internal/limit's) are taken under ranked locks and take no
// ranked lock themselves.
//
// # The checker
//
// Mutex and RWMutex wrap sync's with a Class (a row of the table). With the
// checker off, the production state, each call costs one predictable
// branch on a package variable and allocates nothing: Lock and Unlock (and
// RLock and RUnlock) do sync's own fast path, inlined (fast.go says how,
// and which tests hold sync's layout to it); what goes on to sync (a
// contended lock, an RWMutex's writer, TryLock) pays one call more.
// BenchmarkLock and BenchmarkSyncMutex compare the two. A test binary turns
// it on in its TestMain (EnableForTests; off while benchmarking): every
// lock then records itself in a fixed table of the goroutine's held locks
// and panics before it would take a lock against the order, naming both;
// an unlock by a goroutine that does not hold the lock panics too. A lock
// one goroutine takes and another releases (a frame's rest, wsframe) is
// handed over explicitly: HandOff by the first, Adopt by the second.
// TestInversionFires takes two locks the wrong way on purpose.
package lockrank
