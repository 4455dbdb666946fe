// Package wstransport is the relay's WebSocket transport: it upgrades
// connections with coder/websocket, reads and writes their frames with
// package wsframe, and hands the routing core (package core) each
// connection, each message and, when it is written, each frame's socket.
// It also runs the links that carry a connection to the machine holding
// its room.
package wstransport
