// Package arrival reads the kernel's receive stamps of UDP datagrams
// (SO_TIMESTAMPNS, Linux): the moment a datagram reached its socket, before
// any goroutine was scheduled to read it. purrctl bench's load asks for
// them on its sockets, LiteNetLib's (package litenet, Config.Arrivals) and
// the echo baseline's plain ones alike, so that the latency it reports for
// a server can leave out the load generator's own scheduling.
//
// Elsewhere than Linux, Enable reports errors.ErrUnsupported, Space is 0
// and Parse finds nothing.
package arrival
