package bench

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// Phases of a traffic run; receivers and senders count only in measuring.
const (
	phaseWarmup int32 = iota
	phaseMeasuring
	phaseDone
)

// creditTimeout gives a closed-loop sender its credit back when a message
// has not arrived for that long (dropped, or very late), so one loss cannot
// stall a sender. Such waits are counted as credit_stalls.
const creditTimeout = time.Second

// traffic is one run's senders and receivers. Every field is static once
// start ran, except the counters, each owned by its goroutine and read
// after wg.Wait.
type traffic struct {
	o     Options
	base  time.Time // payload timestamps are monotonic ns since base
	phase atomic.Int32
	stop  chan struct{}
	wg    sync.WaitGroup

	senders []*sender
	recvs   []*receiver
}

// sender is one sending loop: a client towards its host, or a host
// towards its clients (round robin over ids).
type sender struct {
	idx     uint32
	credits chan struct{} // closed loop only
	frame   []byte        // what is written
	stamp   []byte        // the payload inside frame: idx, time, padding
	send    func(frame []byte) error
	perSec  float64 // open loop: messages per second of this sender
	limit   int64   // hard stop in messages

	sent, errs, stalls int64 // owned by the loop
}

// Which crossing of the relay a receiver times: a client's message to its
// host, or a host's to a client (a relay round trip is one of each); the
// echo's are its own round trips.
const (
	crossingEcho = iota
	crossingToHost
	crossingToClient
)

// receiver is one connection's reading: a loop of its own calling recv
// (pull), or the connection's own reader handing each message to got
// (attach, push: the relay's UDP load, client.OnMessage), so that a
// LiteNetLib peer's message costs one goroutine wake-up in the load, as
// a plain socket's does in the echo's. Exactly one of recv and attach is
// set.
//
// A receiver also times each message from the kernel's arrival stamp of
// its datagram (internal/arrival), when the transport has one (UDP on
// Linux): that latency leaves out the load's own scheduling, which a busy
// load generator adds to every message it reads (ha).
type receiver struct {
	recv     func(buf []byte) ([]byte, time.Time, error)             // payload (nil to skip) and its arrival stamp
	attach   func(got func(p []byte, at time.Time), end func(error)) // static
	crossing int                                                     // static

	h, ha             histogram // owned like msgs: as the load read it; as the kernel stamped it
	msgs, bytes, errs int64     // owned by the loop (pull) or the connection's reader (push)
}

func nowNS(base time.Time) int64 { return int64(time.Since(base)) }

// newTraffic wires senders and receivers onto the connected rooms of t:
// the relay's (addRelay), or a baseline's, which reproduces the relay's
// pattern on an echo server (addEcho, addUDPEcho): whoever sends to the
// relay sends the same bytes to the echo server and reads them back on
// the same connection.
func newTraffic(o Options, rooms []*room, t target) *traffic {
	tr := &traffic{o: o, base: time.Now(), stop: make(chan struct{})}
	fanIn := o.Mode == FanIn || o.Mode == Both
	fanOut := o.Mode == FanOut || o.Mode == Both
	for _, r := range rooms {
		if len(r.clients) == 0 {
			continue
		}
		switch {
		case t.udpEcho.IsValid():
			tr.addUDPEcho(r, fanIn, fanOut)
		case t.echoURL != "":
			tr.addEcho(r, fanIn, fanOut)
		default:
			tr.addRelay(r, fanIn, fanOut)
		}
	}
	limit := max(1, o.MaxMessages/int64(max(1, len(tr.senders))))
	for _, s := range tr.senders {
		s.limit = limit
	}
	return tr
}

// addRelay wires one relay room: clients send to their host, the host
// sends SEND_ONE to its clients in turn, with the run's delivery method
// (ignored over WebSocket).
func (tr *traffic) addRelay(r *room, fanIn, fanOut bool) {
	ctx := context.Background() // no timer per read or write; closing unblocks
	d := tr.o.method
	if fanIn {
		for _, c := range r.clients {
			cl := c.cl
			tr.addSender(make([]byte, tr.o.Size), 0, 1, func(f []byte) error { return cl.SendWith(ctx, d, f) })
		}
		h := r.host.host
		tr.addPushReceiver(crossingToHost, func(got func([]byte, time.Time), end func(error)) {
			h.OnEvent(func(ev client.Event, err error) {
				if err == nil && ev.Type == wire.ToHostData {
					got(ev.Payload, ev.Arrival)
				}
			}, end)
		})
	}
	if fanOut {
		h, ids, k := r.host.host, r.ids, 0
		tr.addSender(make([]byte, tr.o.Size), 0, len(ids), func(f []byte) error {
			t := ids[k]
			if k++; k == len(ids) {
				k = 0
			}
			return h.SendOneWith(ctx, t, d, f)
		})
		for _, c := range r.clients {
			cl := c.cl
			tr.addPushReceiver(crossingToClient, func(got func([]byte, time.Time), end func(error)) {
				cl.OnMessage(func(_ wire.Delivery, p []byte, at time.Time) { got(p, at) }, end)
			})
		}
	}
}

// addEcho wires one room of the WebSocket baseline.
func (tr *traffic) addEcho(r *room, fanIn, fanOut bool) {
	ctx := context.Background()
	if fanIn {
		for _, c := range r.clients {
			cl := c.cl
			tr.addSender(make([]byte, tr.o.Size), 0, 1, func(f []byte) error { return cl.Send(ctx, f) })
			tr.addReceiver(clientRecv(cl, 0))
		}
	}
	if fanOut {
		cl := r.host.cl
		frame := wire.AppendSendOne(nil, 1, make([]byte, tr.o.Size))
		tr.addSender(frame, 5, len(r.clients), func(f []byte) error { return cl.Send(ctx, f) })
		tr.addReceiver(clientRecv(cl, 5))
	}
}

func clientRecv(cl *client.Client, skip int) func([]byte) ([]byte, time.Time, error) {
	ctx := context.Background()
	return func(buf []byte) ([]byte, time.Time, error) {
		n, err := cl.RecvInto(ctx, buf)
		if err != nil || n < skip {
			return nil, time.Time{}, err
		}
		return buf[skip:n], time.Time{}, nil
	}
}

// addSender adds a loop sending frame (whose payload starts at off) for
// peers receivers: its window and rate scale with them.
func (tr *traffic) addSender(frame []byte, off, peers int, send func([]byte) error) {
	s := &sender{idx: uint32(len(tr.senders)), frame: frame, stamp: frame[off:], send: send}
	for i := range s.stamp {
		s.stamp[i] = 0xa5
	}
	if tr.o.Rate == 0 {
		s.credits = make(chan struct{}, tr.o.Window*peers)
		for range cap(s.credits) {
			s.credits <- struct{}{}
		}
	} else {
		s.perSec = tr.o.Rate * float64(peers)
	}
	tr.senders = append(tr.senders, s)
}

func (tr *traffic) addReceiver(recv func([]byte) ([]byte, time.Time, error)) {
	tr.recvs = append(tr.recvs, &receiver{recv: recv, crossing: crossingEcho})
}

// addPushReceiver adds a receiver whose connection hands it each message
// (attach, called once by start).
func (tr *traffic) addPushReceiver(crossing int, attach func(got func([]byte, time.Time), end func(error))) {
	tr.recvs = append(tr.recvs, &receiver{attach: attach, crossing: crossing})
}

// start runs every loop.
func (tr *traffic) start() {
	for _, r := range tr.recvs {
		tr.wg.Add(1)
		if r.attach != nil {
			r.attach(func(p []byte, at time.Time) { tr.got(r, p, at) }, func(error) {
				tr.ended(r)
				tr.wg.Done()
			})
			continue
		}
		go tr.receive(r)
	}
	for _, s := range tr.senders {
		tr.wg.Add(1)
		go tr.sendLoop(s)
	}
}

func (tr *traffic) receive(r *receiver) {
	defer tr.wg.Done()
	buf := make([]byte, client.ReadLimit)
	for {
		p, at, err := r.recv(buf)
		if err != nil {
			tr.ended(r)
			return
		}
		tr.got(r, p, at)
	}
}

// ended counts a connection that ended while the run was measuring.
func (tr *traffic) ended(r *receiver) {
	if tr.phase.Load() == phaseMeasuring {
		r.errs++
	}
}

// got times one received payload (and from at, its arrival stamp, if it
// has one) and gives its sender a credit back (closed loop). A stamp is
// wall-clock time, a payload's send time monotonic since base: at.Sub
// takes the stamp's distance from base's wall clock, which moves with
// the monotonic one but for clock adjustments, nanoseconds a second.
func (tr *traffic) got(r *receiver, p []byte, at time.Time) {
	if len(p) < MinSize {
		return
	}
	idx := binary.LittleEndian.Uint32(p)
	sent := int64(binary.LittleEndian.Uint64(p[4:]))
	lat := nowNS(tr.base) - sent
	if tr.phase.Load() == phaseMeasuring {
		r.h.record(lat)
		if !at.IsZero() {
			r.ha.record(int64(at.Sub(tr.base)) - sent)
		}
		r.msgs++
		r.bytes += int64(len(p))
	}
	if int(idx) < len(tr.senders) {
		if c := tr.senders[idx].credits; c != nil {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

func (tr *traffic) sendLoop(s *sender) {
	defer tr.wg.Done()
	binary.LittleEndian.PutUint32(s.stamp, s.idx)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var interval time.Duration
	if s.perSec > 0 {
		interval = time.Duration(float64(time.Second) / s.perSec)
	}
	// Spread the senders' phases over one interval: started together,
	// they would all fire at the same instants and measure their own burst.
	next := time.Now()
	if interval > 0 {
		next = next.Add(rand.N(interval))
	}
	for n := int64(0); n < s.limit; n++ {
		if !tr.wait(s, timer, interval, &next) {
			return
		}
		binary.LittleEndian.PutUint64(s.stamp[4:], uint64(nowNS(tr.base)))
		if err := s.send(s.frame); err != nil {
			if tr.phase.Load() == phaseMeasuring {
				s.errs++
			}
			return
		}
		if tr.phase.Load() == phaseMeasuring {
			s.sent++
		}
	}
}

// wait blocks until s may send: a credit (closed loop) or its next slot
// (open loop). It reports false once the run stops.
func (tr *traffic) wait(s *sender, timer *time.Timer, interval time.Duration, next *time.Time) bool {
	if s.credits != nil {
		select {
		case <-s.credits:
			return true
		case <-tr.stop:
			return false
		default:
		}
		timer.Reset(creditTimeout)
		select {
		case <-s.credits:
			timer.Stop()
			return true
		case <-timer.C:
			if tr.phase.Load() == phaseMeasuring {
				s.stalls++
			}
			return true
		case <-tr.stop:
			timer.Stop()
			return false
		}
	}
	*next = next.Add(interval)
	d := time.Until(*next)
	if d < -time.Second {
		// Far behind (the server pushes back): do not burst to catch up.
		*next = time.Now()
	}
	if d <= 0 {
		select {
		case <-tr.stop:
			return false
		default:
			return true
		}
	}
	timer.Reset(d)
	select {
	case <-timer.C:
		return true
	case <-tr.stop:
		timer.Stop()
		return false
	}
}
