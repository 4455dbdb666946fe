// Package litenet is a LiteNetLib peer written from the protocol
// (docs/UDP.md, section 3) and checked against a real session's datagrams
// (docs/LITENETLIB-VECTORS.md, testdata/session-2.1.2.pcap): the server
// side of what a stock 2.x client speaks, and the client side for
// purrfly's own tests, smoke checks and load. It knows nothing of rooms
// or PurrNet: it carries messages with LiteNetLib's five delivery methods.
//
// # Protocol
//
// Every datagram starts with one byte: the packet property (bits 0-4), the
// connection number (bits 5-6, 0..3, on every packet once connected; a
// packet of another number is an older connection's and is dropped) and a
// fragmented flag (bit 7). A client opens with ConnectRequest (protocol id
// 13, its connect time in .NET ticks, the connect key as a NetDataWriter
// string); the server answers a 15-byte ConnectAccept echoing the connect
// time verbatim with flags byte 0 (PurrNet's forked client offers a
// "repair" extension in bit 62 of the connect time; flags 0 declines it),
// answers a repeated request with the same accept, and treats a newer
// connect time from the same address as a reconnection with the next
// connection number. A wrong key gets Disconnect (ConnectionRejected), a
// wrong protocol id InvalidProtocol, anything else from an unknown address
// PeerNotFound (Disconnect gets ShutdownOk).
//
// Channels (one per method, ChannelsCount 1, channel id = method):
// ReliableOrdered and ReliableUnordered use a 64-packet window with a
// 13-byte ack (window start, bit seq%64), resends after 25 ms + 2.1 x RTT
// (RTT from Ping/Pong), small messages merged into ReliableMerged packets
// (one sequence number for several messages), larger ones fragmented at
// MTU 1024 (1,014 bytes a fragment); Sequenced delivers only newer
// packets; ReliableSequenced resends its last packet until a 4-byte ack
// names it; Unreliable is a 1-byte header. What goes to one peer in one
// flush is packed into Merged datagrams ([0x0D]([u16][packet])*; a single
// packet goes bare). MtuCheck is answered with MtuOk; discovery stays off,
// as in LiteNetLib 2.x by default. NatMessage carries NAT introduction
// (nat.go).
//
// # Two wire versions, one engine
//
// Config.Version V1 speaks LiteNetLib 1.x (docs/LITENETLIB-1.md,
// testdata/session-1.3.1.pcap): the same packets without ReliableMerged,
// so every property from Ack up is one lower (Merged is 0x0C). The engine
// works in 2.x numbering throughout; a 1.x socket renumbers byte 0 of
// each datagram and of each packet inside a Merged one as it reads
// (fromV1) and as it writes (the emitter, socket.write), and its reliable
// channels give every message a sequence number of its own (relChan.merge
// off), several still sharing a Merged datagram. The versions share
// protocol id 13, so each has its own port: a 2.x ConnectRequest at a 1.x
// socket is answered with 2.x's InvalidProtocol byte, a 1.x one at a 2.x
// socket reads as a Pong from a stranger and gets PeerNotFound, which 1.x
// reads as InvalidProtocol. A 1.x socket carries no NAT introduction.
//
// # Goroutines, no goroutine per peer
//
// An Endpoint has one or more sockets (Config.Sockets, SO_REUSEPORT), each
// with two goroutines: a reader that takes up to 64 datagrams per recvmmsg
// (8 on a client's socket; recv_linux.go), processes them and delivers
// messages to the Handler (with Config.Arrivals, each datagram's kernel
// arrival stamp goes along, Peer.Arrival, under the peer's rmu),
// and a flusher that runs the socket's timer wheel (wheel.go: resends,
// pings, timeouts, Disconnect repeats; one slot per tick, each peer in the
// slot of its next deadline, so a tick touches only the peers due) and
// flushes peers woken by other goroutines. Flushing (Handler.Flush, then
// packing each woken peer's packets into one socket-wide batch written
// with one sendmmsg) is done by whoever holds the socket's flushMu: the
// reader right after its batch when it is free, else the flusher. At low
// rates a datagram in is answered on the goroutine that read it, with no
// hand-off; under load one flush serves many peers. With
// Config.SendFlushes (the Go client's) a Send from elsewhere flushes on
// the sender's goroutine when no flush is running. With
// Config.BusyWait (the busy rule, the relay's default) a woken peer whose
// recent wakes came less than the wait apart on average is put in the
// socket's held list instead and flushed once the wait is up (the flusher
// wakes for it), so only a peer that will likely be sent more waits for
// company. With Config.FlushDelay (a fixed wait) the reader flushes
// nothing: woken peers wait for the flusher, up to the delay after the
// first of them, and what each was sent meanwhile leaves merged, as
// LiteNetLib sends on its update loop (on loopback a datagram's cost is
// mostly the kernel's, per datagram, so fewer datagrams is less CPU per
// message). Under every rule acks ride with whatever else goes to the
// peer, or leave one tick later on their own, so a burst is acknowledged
// by one datagram (a stock client in manual mode reads one datagram per
// frame) and an ack, which delays no message, never doubles the
// datagrams a peer sending reliably is sent.
//
// # Ownership and locks
//
//   - Endpoint: configuration, sockets and clock static after start; the
//     peer table (tables.go) is sharded by address, each shard under its
//     own RWMutex; the pending table has its own mutex.
//   - Peer.mu guards the connection's state: channels, timers, RTT, queues.
//     Held only while processing one datagram or emitting one flush's
//     packets, never across a Handler call or a system call.
//   - Peer.rmu serialises the Handler's Connected, Receive and
//     Disconnected calls for the peer (held by the reader while it
//     delivers, and around Disconnected), so a Handler sees one peer's
//     events in order and never concurrently.
//   - socket.flushMu guards the socket's batch, wheel, emitter and held
//     list (and each peer's busy-rule fields); socket
//     dirtyMu the list of woken peers.
//
// These locks are in one lock order with the relay's, the table in the
// doc of package internal/lockrank, whose checker this package's tests
// run: socket.flushMu and Peer.rmu rank first (the Handler runs under one
// of them and takes the relay's locks), Peer.rmu before Peer.mu; Peer.mu,
// socket.dirtyMu, the pending table and the peer table's shards are
// leaves, under which no ranked lock is taken.
//
// # Bounds (Config)
//
// Datagrams from unknown addresses create nothing but, for a valid connect
// request, a pending connection: the pending table is bounded in total
// (MaxPending) and per source address (MaxPendingPerIP), entries expire
// after PendingTimeout unless the application confirms them
// (Peer.Confirm, the relay: on authentication). An address proves it
// receives by answering the ping sent at once after its first packet (its
// sequence random) or by echoing the accept's cookie in "network changed"
// (accept.go); at either bound the oldest unproven entry (of that source,
// at its bound) is evicted, so forged requests push out only unproven
// entries, never a client that proves itself. Until it proves itself an
// address is sent no more datagrams and bytes than it sent, over the
// peer's life (reflect.go): never pinged again, answered within that
// credit, forgotten without a word if it never went on; answers to
// addresses without a connection (accept, reject, PeerNotFound,
// ShutdownOk, InvalidProtocol) are never longer than what they answer and
// are rate-limited per socket (ReplyRate). Every datagram written is
// counted in Stats.Sent.
// Reassembly holds at most 64 messages per peer, each of at most
// MaxMessage bytes and 256 parts, within a budget of the heap it really
// holds (fragment.go: a part costs its pooled buffer and pkt, a group its
// slice), so tiny parts are not free; a message past that ends the peer
// (ReasonTooBig). Malformed packets from a connected peer are dropped and
// counted; the peer stays.
//
// # Allocation
//
// The steady path (datagram in, messages delivered, packets queued,
// merged, acknowledged and written) allocates nothing: buffers come from
// size-classed pools (pool.go), windows from a pool, the read and write
// batches are preallocated, and addresses go to the kernel as sockaddrs
// written in place.
//
// # System calls
//
// On Linux a socket reads with recvmmsg and writes with sendmmsg, both
// called directly with RawSyscall6 on the non-blocking socket (the
// runtime's poller still parks a goroutine on EAGAIN). A call that cannot
// block needs none of the runtime's syscall bookkeeping, whose first call
// after an idle spell wakes the runtime's monitor thread: at game rates,
// where each datagram wakes an idle endpoint, that wake-up and the monitor's
// polling cost a quarter to a third of the relay's CPU per message.
package litenet
