package core

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Drop reasons: a packet that reached the relay and went nowhere. Every one
// is counted in purrfly_relay_dropped_packets_total{reason}.
const (
	DropQueueOverflow  = "queue_overflow"   // the receiver's queue hit its hard bound (the receiver is closed)
	DropReceiverClosed = "receiver_closed"  // the receiver was already closing
	DropSmallClient    = "small_client"     // a client packet of one byte or less
	DropNoHost         = "no_host"          // a client packet while the room has no host
	DropIsolated       = "isolated"         // a client packet during a migration lease, not the promoted host's lane
	DropBadTarget      = "bad_target"       // SEND_ONE/KICK/pipe target not found (or not in the room)
	DropEmptyPayload   = "empty_payload"    // SEND_ONE or pipe packet with nothing to deliver
	DropEmpty          = "empty_packet"     // a host packet of zero bytes
	DropTruncated      = "truncated_packet" // SEND_ONE/KICK/pipe shorter than its header
	DropUnknown        = "unknown_packet"   // unknown host packet type
	DropSenderClosed   = "sender_closed"    // a packet read after its sender was told to go
	// DropTooLargeForHost: a client packet over wire.MaxMessageSize-5 bytes,
	// whose [2][sender:4][payload] frame would pass the 65,535 bytes the
	// host's socket takes (PurrNet drops the host's connection beyond).
	DropTooLargeForHost = "too_large_for_host"
	DropBadMethod       = "bad_method"        // a UDP packet with no valid delivery method byte
	DropTooLargeForUDP  = "too_large_for_udp" // an unreliable frame longer than one LiteNetLib packet
)

var dropReasons = []string{DropQueueOverflow, DropReceiverClosed, DropSmallClient, DropNoHost, DropIsolated,
	DropBadTarget, DropEmptyPayload, DropEmpty, DropTruncated, DropUnknown, DropSenderClosed, DropTooLargeForHost,
	DropBadMethod, DropTooLargeForUDP}

// Forwarding directions for purrfly_relay_forwarded_*{dir}.
const (
	DirToHost   = 0
	DirToClient = 1
	DirPipe     = 2
	DirControl  = 3
	DirMeshOut  = 4 // a forwarded client's frames, toward the holder machine
	DirMeshIn   = 5 // the holder machine's frames, toward a forwarded client
)

var dirNames = [...]string{"to_host", "to_client", "pipe", "control", "mesh_out", "mesh_in"}

// metrics holds the core's collectors, registered on the core's
// registerer. Counters used on the hot path are resolved once here so
// that counting a packet never allocates.
type metrics struct {
	fwdPackets [len(dirNames)]prometheus.Counter
	fwdBytes   [len(dirNames)]prometheus.Counter
	drops      map[string]prometheus.Counter // static after newMetrics
	disconnect [numReasons]prometheus.Counter

	// direct counts the frames senders wrote themselves by result
	// (Conn.Send).
	direct [numDirectResults]prometheus.Counter

	authOK, authFailed prometheus.Counter

	// hostNeverCame counts the rooms released because their host did not
	// connect in time (Expire).
	hostNeverCame prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, conns, rooms func() float64) (*metrics, error) {
	m := &metrics{drops: make(map[string]prometheus.Counter, len(dropReasons))}
	fwdP := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_forwarded_packets_total",
		Help: "Packets queued for delivery, by direction (control: relay-made frames).",
	}, []string{"dir"})
	fwdB := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_forwarded_bytes_total",
		Help: "Bytes queued for delivery, by direction.",
	}, []string{"dir"})
	drops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_dropped_packets_total",
		Help: "Packets the relay dropped, by reason.",
	}, []string{"reason"})
	disc := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_disconnects_total",
		Help: "Connections ended, by reason (forced ones included).",
	}, []string{"reason"})
	auth := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_auth_total",
		Help: "Authentication attempts, by result.",
	}, []string{"result"})
	direct := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_direct_writes_total",
		Help: "Frames a sender's reader wrote to the receiver's socket itself, without blocking, by result (whole; partial: the rest left to the writer; again: nothing written, queued; failed; closing: the connection was closing, dropped).",
	}, []string{"result"})
	connG := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "purrfly_relay_connections",
		Help: "Open relay connections (any state).",
	}, conns)
	roomG := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "purrfly_relay_rooms",
		Help: "Rooms held by this relay.",
	}, rooms)
	m.hostNeverCame = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_relay_rooms_unhosted_total",
		Help: "Rooms released because their allocation's host did not connect within HOST_CONNECT_TIMEOUT_SECONDS.",
	})
	for _, c := range []prometheus.Collector{fwdP, fwdB, drops, disc, auth, direct, connG, roomG, m.hostNeverCame} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register relay metrics: %w", err)
		}
	}
	for i, d := range dirNames {
		m.fwdPackets[i] = fwdP.WithLabelValues(d)
		m.fwdBytes[i] = fwdB.WithLabelValues(d)
	}
	for _, r := range dropReasons {
		m.drops[r] = drops.WithLabelValues(r)
	}
	for r := Reason(1); r < numReasons; r++ {
		m.disconnect[r] = disc.WithLabelValues(r.String())
	}
	for i, r := range DirectResultNames {
		m.direct[i] = direct.WithLabelValues(r)
	}
	m.authOK = auth.WithLabelValues("ok")
	m.authFailed = auth.WithLabelValues("failed")
	return m, nil
}

// drop counts one dropped packet.
func (m *metrics) drop(reason string) { m.drops[reason].Inc() }

// forwarded counts one queued frame of n bytes.
func (m *metrics) forwarded(dir, n int) {
	m.fwdPackets[dir].Inc()
	m.fwdBytes[dir].Add(float64(n))
}
