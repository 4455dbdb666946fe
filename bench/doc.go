// Package bench is the load tool behind `purrctl bench`: it loads a relay
// with rooms of PurrNet connections and measures it against the practical
// limit, a plain coder/websocket echo server under the same load, in the
// same invocation; over UDP (Options.Transport) the relay is loaded over
// LiteNetLib and the limit is a plain Go UDP echo server. BENCHMARKS.md
// has the commands and the figures.
//
// # Processes
//
// Servers run in their own processes so that their CPU time and memory
// are theirs alone: Run re-executes its own binary (os.Executable, or
// Options.Executable) with ServerEnv set to a JSON ServerConfig; purrctl
// routes that to the hidden `purrctl bench server` command, which calls
// ServeChild (the package's tests re-execute the test binary, whose
// TestMain does the same). A child binds 127.0.0.1:0, prints one JSON line
// {"url","pid"} on stdout and serves until its stdin reaches EOF. It dies
// with the parent: the parent closes stdin and then kills it, a cancelled
// context kills it, and on Linux the kernel SIGKILLs it if the parent dies
// (Pdeathsig).
//
//   - Traffic and idle modes: a balancer runs in the load process (it is
//     idle while traffic flows) and the relay is a child registered with
//     it; rooms are allocated and joined through the balancer as PurrNet
//     does. With Options.BalancerURL the rooms come from an external
//     balancer instead, and the server is measured only if ServerPID names
//     it. The baseline is an echo child (KindEcho).
//   - Balancer mode: the balancer and a real relay are both children, and
//     the load process allocates and joins (closed loop, BalancerLoad
//     workers). With Baseline the same load also runs against the floor
//     (KindBalancerFloor, balancerfloor.go): a minimal net/http server
//     that answers the same requests with the same bodies and makes the
//     same one call to the same relay child per allocation, and nothing
//     else; the runs alternate (Repeat), and RatioCPUPerPair is the
//     balancer's CPU per pair over the floor's. The relay child holds
//     every room and does not heartbeat during the run (a heartbeat
//     republishes every room, work the floor never sees). CPUProfile
//     writes each child's CPU profile; WatchEvents keeps a GET /v1/events
//     stream open on the balancer (watch.go), as a dashboard does.
//   - Forwarding mode (Options.Forwarded, forwarded.go): what one mesh hop
//     costs. Two relay children form one multi-machine app, registered
//     with a balancer in the load process; every room lands on relay 1
//     (alone in the allocation region), hosts connect to it, and clients
//     connect without a session hint, as PurrNet does, to relay 2, which
//     forwards them over a link to relay 1. With Baseline the direct run
//     has the clients on relay 1 too, so the ratios read forwarded/direct.
//     Both runs measure both relay processes (CPU and RSS summed) and read
//     relay 2's /metrics for the connections it forwarded and the frames
//     its links carried; every run after the first gets a fresh balancer
//     and fresh relays, so that neither side inherits the other's state.
//   - UDP (Options.Transport client.TransportUDP): traffic and idle modes
//     only. The relay child serves LiteNetLib on an ephemeral port of
//     127.0.0.1 beside WebSocket (its ready line names it), and every
//     allocation and join must carry that port as udpPortV2 (checked).
//     The baseline is a UDP echo child (KindUDPEcho, udpecho.go): one
//     socket and one goroutine, as the relay serves LiteNetLib from one
//     socket with one reader, doing one ReadFromUDPAddrPort and one
//     WriteToUDPAddrPort per datagram into one buffer, allocating
//     nothing. Around the measured window the relay's /metrics give the
//     datagrams its socket received and sent (Side.UDPDatagramsIn/Out).
//   - Connection soak (Options.Soak, soak*.go): a relay child at its
//     production bounds on connections waiting to authenticate, with short
//     authentication and header timeouts. Each round opens the mix a
//     public relay meets (silent TCP connections, slowloris requests,
//     upgrades that never authenticate, clients that never read, clients
//     that play and vanish); the relay must close those it should within
//     the timeout plus a grace, and its goroutines and open files must come
//     back, after every round, to where the first round left them.
//
// The relay and the baseline run one after the other, never at once;
// with Repeat they alternate which goes first, and the medians are kept
// beside the round trips pooled over every run (pooled.go).
//
// # Load
//
// Every connection is a client.Host or client.Client: the load speaks the
// protocol only through the one Go client, with its allocation-free calls
// (NextInto, RecvInto, SendOneWith, SendWith) on a context without a
// deadline. Over UDP they dial with client.TransportUDP (each runs a
// LiteNetLib endpoint of its own: a socket, a reader and a flusher in the
// load process) and send with Options.Delivery (default Unreliable, see
// DefaultUDPDelivery), letting what they send wait up to Options.PeerFlush
// (10 ms) to leave merged, as PurrNet's client sends once per network
// tick; the client's UDP link copies every message it receives, a cost of
// the load, not of the relay.
// Each sending connection has one sender goroutine, each receiving one a
// receiver goroutine. A payload carries the sender's index and its send
// time (monotonic nanoseconds since the run's base time; sender and
// receiver live in this process), so the receiver computes the one-way
// latency through the server and hands a credit back to the sender.
//
//   - fan-in: every client sends to its host; the relay forwards
//     [2][sender][payload] to the host.
//   - fan-out: every host sends SEND_ONE to its clients in turn.
//   - both: both at once.
//
// Closed loop (Rate 0): each sender keeps Window messages in flight per
// receiving peer (a fan-out host: Window per client) and sends when a
// credit returns; a credit not back within a second (a dropped or very
// late message) is given back anyway (counted as credit_stalls). Open
// loop: each sender paces Rate messages per second per peer, the
// senders' phases spread at random over one interval so that they do not
// fire in bursts.
//
// The baseline reproduces the pattern on the echo server: the same
// connections (hosts included) authenticate the same way (the echo server
// answers the auth message with 3), and whoever sends to the relay sends
// the same bytes to the echo server and reads them back on the same
// connection. So per message both servers read one message and write one;
// the relay's write goes to another connection, the echo's to the same.
//
// A plain UDP echo cannot do LiteNetLib's handshake, so the UDP baseline's
// connections are plain UDP sockets, one per connection as each LiteNetLib
// client has its own. A message is one datagram as long as the one the
// relay reads (the payload behind LiteNetLib's header and PurrNet's
// [method] or [1][target:4][method]), sent and read back on the same
// socket. The work is not the same: the relay also forwards to another
// peer and does LiteNetLib's share (acks, pings every 900 ms each way,
// merging, and fragments past one packet); Unreliable and Sequenced
// payloads stop short of one packet (Options validation says how far).
//
// # What is measured
//
// Counters and latencies are recorded only in the measured window (after
// Warmup, for Duration), by per-goroutine histograms merged at the end
// (log-linear buckets, about 3 % resolution), so recording neither locks
// nor allocates. Around the same window the server's user+system CPU time
// is read from /proc/<pid>/stat and its RSS from /proc/<pid>/status:
// before the load connects, once every connection is open (memory per
// connection is that growth divided by the connections), and at the end.
// The load process's own CPU is reported too: on a small machine the load
// generator, not the server, may be what saturates. Around the window a
// WebSocket relay child's /metrics say how its frames were written
// (Side.DirectFrames: by the reader that routed them, one system call
// each; Side.WriteBatches: batches of queued frames by the receivers'
// writers), so that a run shows which of the two paths it measured.
//
// # Bounds
//
// Every loop that sends is bounded in time (Warmup + Duration, then the
// connections are closed, which unblocks every read and write) and in
// count (MaxMessages split over the senders). Connecting is bounded by
// SetupTimeout. Only loopback is used; idle runs spread their source
// addresses over 127.0.0.1, 127.0.0.2, ... (sourceIPSpan connections each)
// to stay clear of the ephemeral port limit. UDP sockets do not share
// ports with TCP's four-tuples: each binds one ephemeral port of its own
// (MaxUDPConnections of them at most), all from 127.0.0.1, so UDP dials
// run at most udpDialParallel at once, under litenet's bound on pending
// connections per source address. UDP connections leave gracefully
// (endRooms, each bounded by the client's close wait), so that the relay
// does not carry them, pinged, into the next run.
package bench
