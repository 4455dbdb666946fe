// Package core is the relay's routing core: connections, their queues,
// rooms and their phases, routing, host migration, and forwarding a peer
// to the machine holding its room. It knows no transport: a transport
// hands it a connection, a message (package buf) and the message's
// delivery method, and drains what it queues.
package core
