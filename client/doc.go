// Package client is purrfly's one Go PurrNet client: the end-to-end tests,
// `purrctl smoke`, the rollout tool's smoke step and the load generator of
// `purrctl bench` all speak the protocol through it, so nothing is written twice.
//
// It speaks exactly what PurrNet's PurrTransport speaks: over WebSocket as
// its WebGL builds do (docs/PROTOCOL.md sections 1 to 3), and over UDP
// with LiteNetLib 2.x as its desktop, mobile and Editor builds do
// (docs/UDP.md; DialOptions.Transport, package litenet): the same
// authentication message sent ReliableOrdered, PurrNet's UDP framing with
// delivery methods in the packets (wire/udp.go), a NAT introduction
// ([6][token]) read before [3] when asked for ({"nat":true}).
//
// # Roles
//
//   - Balancer is the balancer's public HTTP API: /servers, /ping (timed),
//     POST /allocate_ws (new clients: headers region, name, allocation_id),
//     GET /allocate_ws (older clients), /join, /list, /getTotalConnections.
//     Every request sends "Cache-Control: no-cache" and an empty body, runs
//     under a timeout (10 s like PurrNet unless set), reads at most
//     MaxResponseSize bytes of answer, and turns a non-2xx answer into the
//     *wire.Error of its body, so errors.Is(err, wire.ErrRoomTaken) works.
//     Capabilities are validated as PurrNet validates them. Retry mirrors
//     PurrNet's retry loop (up to 10 tries, 1 s apart, same allocation id).
//   - Host is a room's host connection: it receives wire.ToHost* packets
//     (Next, NextInto) and sends SEND_ONE, KICK and keepalives.
//   - Client is an ordinary player: it sends payloads as they are and receives
//     the host's SEND_ONE payloads unframed.
//   - Pipe is a pipe-mode peer ({"pipe":true}): [target][data] out,
//     [sender][data] in.
//   - Raw is an unauthenticated WebSocket with no framing or size checks, for
//     tests of bad input (text frames, oversized messages, arbitrary auth).
//     Host.Raw, Client.Raw and Pipe.Raw give the same view of an
//     authenticated connection.
//   - Smoke is the smoke check shared by `purrctl smoke`, the rollout tool and
//     the end-to-end tests: allocate, connect a host and a client, exchange
//     packets both ways, check the connect and disconnect notices.
//
// # Wire facts kept from PurrNet
//
// The relay URL is ws://host:port or wss://host:port (ssl), empty path, no
// query; a default port (80 for ws, 443 for wss) is left out of the URL as
// .NET's UriBuilder does. The authentication message is the binary frame
// {"roomName":…,"clientSecret":…,"nat":false}, byte for byte what
// PurrTransport's JsonUtility writes; a pipe sends {"pipe":true}. The relay
// answers one byte 3 (authenticated) or 4 (refused: ErrAuthFailed), a pipe
// [5][id:4]. The client adds the affinity hint ?s=<hex(room)> to the
// upgrade URL so a multi-machine relay app can route before upgrading;
// DialOptions.NoSessionHint leaves it out, as PurrNet's own client does.
//
// # Sizes
//
// No message larger than wire.MaxMessageSize (65,535 bytes, frame header
// included) is ever written by Host, Client or Pipe: they return ErrTooLarge
// before touching the connection. Only Raw writes anything. Reads accept up to
// ReadLimit (exactly 65,535 bytes, as PurrNet's host socket; a relay drops a
// client payload over 65,530 bytes rather than frame it past that); a larger
// message closes the connection with status 1009.
//
// Over UDP each connection has its own socket and LiteNetLib endpoint
// (two goroutines); received messages wait in a bounded queue for the
// reader (a reader far behind gets the connection dropped), and Close
// disconnects once what was sent is acknowledged. Raw is WebSocket only.
//
// Client.OnMessage and Host.OnEvent (push.go) replace reading: every
// message goes to a function instead, over UDP on the endpoint's reader
// goroutine as the datagram is read, without the queue (the load of
// `purrctl bench`, whose latency would otherwise include a hand-off the
// echo's plain sockets do not make).
//
// # Concurrency
//
// Host, Client, Pipe and Raw follow coder/websocket's rules:
//   - at most one goroutine reads at a time (Next, NextInto, Recv, RecvInto,
//     Read, ReadRaw); reads by several goroutines are not ordered; after
//     OnMessage or OnEvent, none does;
//   - every write method (SendOne, Kick, KeepAlive, Send, WriteRaw,
//     WriteBinary, WriteText) may be called concurrently with each other and
//     with the reader;
//   - Close and CloseNow may be called at any time from any goroutine and
//     unblock the other calls;
//   - you must keep reading to see the relay's close frame and its status
//     (CloseStatus(err) == StatusServiceRestart after a relay drain).
//
// A read or write whose context ends closes the connection (coder/websocket
// semantics): to assert that nothing arrives, send a sentinel afterwards and
// check that it is the next message, rather than waiting for a timeout.
//
// Balancer is safe for concurrent use once its fields are set; set them
// before the first call and never change them after.
//
// # Allocation
//
// The hot path reads with NextInto and RecvInto into a caller's buffer and
// writes SEND_ONE through a pooled buffer: neither allocates per message.
// Next and Recv allocate what they return, for convenience.
package client
