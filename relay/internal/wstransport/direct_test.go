package wstransport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/wsframe"
	"github.com/purrfly/purrfly/wire"
)

// Direct writes (conn.send, claim.write, wsframe.Writer.WriteDirect) on real
// loopback sockets. The test plays a sender's reader: it routes frames to
// a client's conn with send and writes the claims itself, and the client
// is a raw WebSocket peer that reads every frame off the wire, so a
// control frame inside a data frame, a lost, doubled or reordered frame
// shows. Small socket buffers (capSocketBuffer) make the kernel take part
// of a frame, or none.

// directRig is a relay with one room and its host; clients join it as raw
// peers.
type directRig struct {
	t      *testing.T
	s      *rig
	host   *wstest.Peer
	secret string // the room's client secret
}

func newDirectRig(t *testing.T) *directRig {
	t.Helper()
	if !canCapSocketBuffers || !wsframe.DirectWrites() {
		t.Skip("needs capped socket buffers and raw writes")
	}
	s := newRig(t, rigConfig{slow: time.Hour}) // only the tests close conns
	hs, cs := s.allocate("direct")
	return &directRig{t: t, s: s, host: s.join("direct", hs), secret: cs}
}

// rawClient is a client that speaks WebSocket by hand.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
	c  *core.Conn      // its conn in the relay
	fc *wsframe.Writer // the relay's side of its socket
}

// join connects a raw client whose receive buffer (and the relay's send
// buffer toward it) is capped at window bytes (0: as the kernel likes).
func (r *directRig) join(window int) *rawClient {
	t := r.t
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if window > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error { return capSocketBuffer(c, soRcvBuf, window) }
	}
	nc, err := d.Dial("tcp", strings.TrimPrefix(r.s.url(), "ws://"))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	req := "GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	auth := wire.Auth{RoomName: "direct", ClientSecret: r.secret}.Marshal()
	if _, err := nc.Write(append([]byte(req), wstest.MaskedFrame(auth)...)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	rc := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second)) // wall clock: a real socket's deadline
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if f, err := wstest.ReadRawFrame(rc.br); err != nil || !bytes.Equal(f.Payload, []byte{wire.Authenticated}) {
		t.Fatalf("auth reply %v %v", f, err)
	}
	rc.c = r.s.core.Conn(r.connected())
	rc.fc = rc.c.Transport().(*conn).fc
	if window > 0 {
		sc, err := rc.fc.Conn.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if err := capSocketBuffer(sc, soSndBuf, window); err != nil {
			t.Fatalf("cap the relay's send buffer: %v", err)
		}
	}
	return rc
}

// connected reads the host's packets up to the next client's
// connection notice (past the notices of clients that left) and returns
// the client's id.
func (r *directRig) connected() wire.ConnID {
	r.t.Helper()
	for {
		b := r.host.Recv()
		pk, err := wire.ParseToHostPacket(b)
		switch {
		case err != nil:
			r.t.Fatalf("host packet %x: %v", b, err)
		case pk.Type == wire.ToHostConnected:
			return pk.IDs[0]
		case pk.Type != wire.ToHostDisconnected:
			r.t.Fatalf("host packet %x, want a client's connection notice", b)
		}
	}
}

// seqFrame is frame seq: size bytes (at least 4), seq first, then a
// pattern of seq.
func seqFrame(seq, size int) *buf.Buf {
	b := buf.Get(size)
	b.Off, b.End = 0, size
	binary.LittleEndian.PutUint32(b.B, uint32(seq))
	for i := 4; i < size; i++ {
		b.B[i] = byte(seq*7 + i)
	}
	return b
}

// checkSeqFrame reports how p differs from frame seq.
func checkSeqFrame(p []byte, seq int) error {
	if len(p) < 4 {
		return fmt.Errorf("frame of %d bytes, want frame %d", len(p), seq)
	}
	if got := int(binary.LittleEndian.Uint32(p)); got != seq {
		return fmt.Errorf("frame %d, want %d", got, seq)
	}
	for i := 4; i < len(p); i++ {
		if p[i] != byte(seq*7+i) {
			return fmt.Errorf("frame %d: byte %d of %d is wrong", seq, i, len(p))
		}
	}
	return nil
}

// waitIdle waits until rc's writer has nothing to do, as between two
// game ticks.
func (rc *rawClient) waitIdle() {
	rc.t.Helper()
	waitFor(rc.t, "the writer to be idle", func() bool {
		return rc.c.WriteIdle()
	})
}

// offer routes frame seq to rc's conn as a reader with nothing more to
// read does, writes the claim if it got one, and reports whether the frame
// was taken (claimed or queued).
func (rc *rawClient) offer(seq, size int) bool {
	cl, ok := rc.c.Offer(seqFrame(seq, size), core.DirToClient, true)
	cl.Write()
	return ok
}

// ping sends a ping the relay's reader answers with a pong through the
// frame mutex.
func (rc *rawClient) ping(payload string) {
	rc.t.Helper()
	key := [4]byte{9, 8, 7, 6}
	f := append([]byte{0x80 | 0x9, 0x80 | byte(len(payload))}, key[:]...)
	for i := range len(payload) {
		f = append(f, payload[i]^key[i%4])
	}
	if _, err := rc.nc.Write(f); err != nil {
		rc.t.Fatalf("ping: %v", err)
	}
}

// readFrames reads data frames 0 to n-1, in order and whole, and the
// pong for ping payload pong (when not empty) wherever it comes between
// them; it fails the test at the first difference.
func (rc *rawClient) readFrames(n int, pong string) {
	rc.t.Helper()
	_ = rc.nc.SetReadDeadline(time.Now().Add(30 * time.Second)) // wall clock: a real socket's deadline
	seq, pongs := 0, 0
	for seq < n || (pong != "" && pongs == 0) {
		f, err := wstest.ReadRawFrame(rc.br)
		switch {
		case err != nil:
			rc.t.Fatalf("after %d of %d frames: %v", seq, n, err)
		case !f.Fin || f.Masked:
			rc.t.Fatalf("after %d frames: a fragmented or masked frame (op %d)", seq, f.Op)
		case f.Op == 0xa:
			if string(f.Payload) != pong || pongs > 0 {
				rc.t.Fatalf("after %d frames: pong %q, want one pong %q", seq, f.Payload, pong)
			}
			pongs++
		case f.Op != 0x2:
			rc.t.Fatalf("after %d frames: op %d, want binary frames", seq, f.Op)
		default:
			if err := checkSeqFrame(f.Payload, seq); err != nil {
				rc.t.Fatalf("after %d frames: %v", seq, err)
			}
			seq++
		}
	}
}

// waitControlBlocked waits until the reader's write of a control frame
// (a pong) is waiting for the frame mutex (held by a frame in progress).
func waitControlBlocked(t *testing.T) {
	t.Helper()
	waitFor(t, "the pong to wait for the frame mutex", func() bool {
		return goroutineIn("wsframe.(*Writer).WriteControl(", "sync.(*Mutex).Lock(")
	})
}

// goroutineIn reports whether a goroutine's stack holds every one of
// frames.
func goroutineIn(frames ...string) bool {
	sb := make([]byte, 1<<20)
	for _, g := range strings.Split(string(sb[:runtime.Stack(sb, true)]), "\n\n") {
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			return true
		}
	}
	return false
}

func (r *directRig) direct(res core.DirectResult) float64 {
	return r.s.metric("purrfly_relay_direct_writes_total", "result", core.DirectResultNames[res])
}

// TestDirectWritePartial: a frame longer than the socket can take is
// partly written by the sender; the rest, with the frame mutex, goes to
// the writer, which finishes it when the peer reads. Frames routed
// meanwhile queue behind it, and the pong the peer asks for meanwhile
// waits for the frame's end: the peer reads every frame whole and in
// order, and the pong between two of them.
func TestDirectWritePartial(t *testing.T) {
	r := newDirectRig(t)
	rc := r.join(4 << 10) // the kernel doubles it: about 16 KiB in flight in all
	rc.waitIdle()
	seq := 0
	for r.direct(core.DirectPartial) == 0 {
		if seq == 8 {
			t.Fatalf("no partial write in %d frames of %d bytes (whole %v, again %v)", seq, wsframe.MaxDirect,
				r.direct(core.DirectWhole), r.direct(core.DirectAgain))
		}
		if !rc.offer(seq, wsframe.MaxDirect) {
			t.Fatalf("frame %d refused", seq)
		}
		seq++
	}
	// The rest is the writer's, which blocks on the full socket; what
	// comes now is queued behind it.
	if st := rc.c.WriteState(); st != "handoff" && st != "writer" {
		t.Fatalf("write side %s after a partial write, want the writer's", st)
	}
	for _, size := range []int{4, 125, 126, 1000, 20000} {
		if !rc.offer(seq, size) {
			t.Fatalf("frame %d refused", seq)
		}
		seq++
	}
	rc.ping("during the rest")
	waitControlBlocked(t)
	rc.readFrames(seq, "during the rest")
	if n := r.direct(core.DirectFailed); n != 0 {
		t.Fatalf("%v direct writes failed", n)
	}
}

// TestDirectWriteAgain: when the socket takes nothing of a frame, the
// sender puts it back at the front of the queue (ahead of what was queued
// during its attempt) and wakes the writer; the peer reads every frame in
// order, and the pong it asked for while the writer waited on the full
// socket between two of them.
func TestDirectWriteAgain(t *testing.T) {
	r := newDirectRig(t)
	rc := r.join(4 << 10)
	rc.waitIdle()
	seq := 0
	for r.direct(core.DirectAgain) == 0 {
		if seq == 200_000 {
			t.Fatalf("the socket took %d small frames", seq)
		}
		if !rc.offer(seq, 8) {
			t.Fatalf("frame %d refused (whole %v, partial %v)", seq, r.direct(core.DirectWhole), r.direct(core.DirectPartial))
		}
		seq++
	}
	// A socket may refuse a write for a moment (a small frame's memory
	// counts for more than its bytes until the kernel merges it), so more
	// frames, queued now, fill it for good; the writer waits on it.
	for range 20 {
		if !rc.offer(seq, 2000) {
			t.Fatalf("frame %d refused", seq)
		}
		seq++
	}
	waitFor(t, "the writer to wait on the full socket", func() bool {
		return goroutineIn("wstransport.(*Transport).writer(", "internal/poll.(*pollDesc).waitWrite(")
	})
	rc.ping("while full")
	rc.readFrames(seq, "while full")
	t.Logf("%d frames: whole %v, partial %v, again %v", seq, r.direct(core.DirectWhole), r.direct(core.DirectPartial),
		r.direct(core.DirectAgain))
}

// TestDirectWriteRacesClose: a conn is closed while its sender writes
// frames to it directly (whole, partial and refused writes on a small
// socket the peer reads from). A graceful close (kicked) delivers every
// frame the sender got taken, in order, then the close frame; an abrupt
// one (the peer gone) delivers a prefix of them, in order, and no close
// frame. Either way the conn ends and its frame mutex is free: no rest of
// a frame was left behind.
func TestDirectWriteRacesClose(t *testing.T) {
	r := newDirectRig(t)
	const rounds, frames = 24, 300
	for round := range rounds {
		graceful := round%2 == 0
		rc := r.join(8 << 10)
		rc.waitIdle()
		closeAt := rand.IntN(frames)
		taken := 0
		sent := make(chan struct{})
		closed := make(chan struct{})
		// The peer reads all along: a peer that stops reading while its
		// window is shut may wait for TCP's zero-window probes, seconds
		// apart, longer than a graceful close's flush is given.
		read := rc.readToEnd()
		go func() {
			defer close(sent)
			for seq := range frames {
				if seq == closeAt {
					close(closed)
				}
				if !rc.offer(seq, 4+rand.IntN(3000)) {
					return
				}
				taken++
			}
		}()
		<-closed
		reason := core.ReasonPeerClosed
		if graceful {
			reason = core.ReasonKicked
		}
		rc.c.Close(reason)
		got, status, err := read()
		<-sent
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		switch {
		case graceful && (got != taken || status != websocket.StatusNormalClosure):
			t.Fatalf("round %d, graceful: read %d of %d frames taken, close %v", round, got, taken, status)
		case !graceful && (got > taken || status != -1):
			t.Fatalf("round %d, abrupt: read %d of %d frames taken, close %v", round, got, taken, status)
		}
		rc.nc.Close()
		rc.writerEnded(fmt.Sprintf("round %d", round))
	}
	t.Logf("whole %v, partial %v, again %v, failed %v", r.direct(core.DirectWhole), r.direct(core.DirectPartial),
		r.direct(core.DirectAgain), r.direct(core.DirectFailed))
}

// readToEnd runs readUntilEnd on a goroutine of its own; the function it
// returns waits for its result.
func (rc *rawClient) readToEnd() func() (int, websocket.StatusCode, error) {
	type end struct {
		frames int
		status websocket.StatusCode
		err    error
	}
	done := make(chan end, 1)
	go func() {
		n, status, err := rc.readUntilEnd()
		done <- end{n, status, err}
	}()
	return func() (int, websocket.StatusCode, error) {
		e := <-done
		return e.frames, e.status, e.err
	}
}

// writerEnded checks that the writer of rc's conn ends and leaves the
// frame mutex free (what: the case, in the failure).
func (rc *rawClient) writerEnded(what string) {
	rc.t.Helper()
	select {
	case <-rc.c.Transport().(*conn).ended:
	case <-time.After(10 * time.Second): // wall clock: a bound on a real writer's end
		rc.t.Fatalf("%s: the writer did not end", what)
	}
	// Nobody owns the socket: a control frame goes out at once (or, past
	// the close frame, is dropped at once).
	free := make(chan struct{})
	go func() {
		_ = rc.fc.WriteControl([]byte{0x8a, 0}, time.Now().Add(time.Second)) // wall clock: a real socket's deadline
		close(free)
	}()
	select {
	case <-free:
	case <-time.After(10 * time.Second): // wall clock: a bound on a real write
		rc.t.Fatalf("%s: the socket is still owned", what)
	}
}

// readUntilEnd reads data frames (each the next in order) until a close
// frame or the end of the socket, and returns how many and the close code
// (-1: none).
func (rc *rawClient) readUntilEnd() (int, websocket.StatusCode, error) {
	_ = rc.nc.SetReadDeadline(time.Now().Add(30 * time.Second)) // wall clock: a real socket's deadline
	for seq := 0; ; seq++ {
		f, err := wstest.ReadRawFrame(rc.br)
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || wstest.IsReset(err):
			return seq, -1, nil
		case err != nil:
			return seq, -1, err
		case f.Op == 0x8:
			if len(f.Payload) < 2 {
				return seq, -1, fmt.Errorf("close frame %x", f.Payload)
			}
			return seq, websocket.StatusCode(binary.BigEndian.Uint16(f.Payload)), nil
		case f.Op != 0x2 || !f.Fin:
			return seq, -1, fmt.Errorf("after %d frames: op %d fin %v", seq, f.Op, f.Fin)
		}
		if err := checkSeqFrame(f.Payload, seq); err != nil {
			return seq, -1, err
		}
	}
}

// TestDirectWritesOfTwoSenders: two readers routing to one host at once,
// each claiming the socket when it is free and queueing behind the other
// when not: the host gets every frame of each, in each one's order.
func TestDirectWritesOfTwoSenders(t *testing.T) {
	r := newDirectRig(t)
	c := r.s.core.Room("direct").Host()
	const n = 2000
	var wg sync.WaitGroup
	for sender := range 2 {
		wg.Go(func() {
			for seq := range n {
				b := buf.Get(9)
				b.Off, b.End = 0, 9
				b.B[0] = byte(sender)
				binary.LittleEndian.PutUint32(b.B[1:], uint32(seq))
				c.Send(b, core.DirToHost, true).Write()
			}
		})
	}
	next := [2]int{}
	for range 2 * n {
		p := r.host.Recv()
		if len(p) != 9 || p[0] > 1 {
			t.Fatalf("frame %x", p)
		}
		if seq := int(binary.LittleEndian.Uint32(p[1:])); seq != next[p[0]] {
			t.Fatalf("sender %d: frame %d, want %d", p[0], seq, next[p[0]])
		}
		next[p[0]]++
	}
	wg.Wait()
	t.Logf("whole %v, partial %v, again %v", r.direct(core.DirectWhole), r.direct(core.DirectPartial), r.direct(core.DirectAgain))
}

// TestDirectWriteOnlyWhenNothingWaits: a reader writes a frame itself
// only when nothing more is waiting to be read (the game-rate case: one
// message, one system call); a burst read at once is queued for the
// receiver's writer, which batches it.
func TestDirectWriteOnlyWhenNothingWaits(t *testing.T) {
	r := newDirectRig(t)
	cl := r.s.join("direct", r.secret)
	id := r.connected()
	(&rawClient{t: t, c: r.s.core.Conn(id)}).waitIdle()
	batches := r.s.metric("purrfly_relay_write_batches_total", "", "")
	for i := range 20 {
		r.host.Send(sendOne(id, fmt.Sprint("one at a time ", i)))
		if got := cl.Recv(); !equal(got, fmt.Sprint("one at a time ", i)) {
			t.Fatalf("got %q", got)
		}
	}
	// (The count follows the write.)
	waitFor(t, "20 frames written by their reader", func() bool { return r.direct(core.DirectWhole) == 20 })
	if n := r.s.metric("purrfly_relay_write_batches_total", "", ""); n != batches {
		t.Fatalf("the writers wrote %v batches of frames sent one at a time", n-batches)
	}
	// A raw host would be needed to put a burst in one TCP segment; a
	// client's packets to the host go the other way: read at once by the
	// client's reader from one write of many frames.
	var burst []byte
	for i := range 50 {
		burst = append(burst, wstest.MaskedFrame(fmt.Appendf(nil, "burst %02d", i))...)
	}
	raw := r.join(0)
	before := r.direct(core.DirectWhole)
	if _, err := raw.nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		pk := r.host.ExpectToHost(wire.ToHostData)
		if want := fmt.Sprintf("burst %02d", i); string(pk.Payload) != want {
			t.Fatalf("host got %q, want %q", pk.Payload, want)
		}
	}
	if n := r.direct(core.DirectWhole) - before; n > 2 {
		t.Fatalf("%v of a burst of 50 frames were written by their reader, want at most the last", n)
	}
}

// TestDirectWriteClaimOutlivesClose: the conn is closed between a
// sender's claim (made under the room lock) and its write (after the lock
// is released), the window a close can race a direct write in. The
// writer waits for the write to end: a graceful close then delivers the
// claimed frame, whole, and its close frame after it, even when the
// socket takes only part of the frame and the rest is finished by the
// flush; an abrupt close delivers at most the frame and no close frame.
// Frames routed after the close are refused, and the frame mutex is free
// once the writer has ended.
func TestDirectWriteClaimOutlivesClose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason core.Reason
		size   int
		window int
	}{
		{"graceful", core.ReasonKicked, 100, 0},
		{"graceful, partly written", core.ReasonKicked, wsframe.MaxDirect, 4 << 10},
		{"abrupt", core.ReasonPeerClosed, 100, 0},
		{"abrupt, partly written", core.ReasonPeerClosed, wsframe.MaxDirect, 4 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newDirectRig(t)
			rc := r.join(tc.window)
			rc.waitIdle()
			cl, ok := rc.c.Offer(seqFrame(0, tc.size), core.DirToClient, true)
			if !ok || !cl.Claimed() {
				t.Fatal("an idle conn's frame was not claimed")
			}
			rc.c.Close(tc.reason)
			if rc.offer(1, 10) {
				t.Fatal("a frame routed after the close was taken")
			}
			read := rc.readToEnd()
			cl.Write()
			got, status, err := read()
			rc.nc.Close() // the close handshake's answer: the peer is gone
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason.Abrupt() {
				if got > 1 || status != -1 {
					t.Fatalf("read %d frames and close %v, want at most the claimed frame and no close frame", got, status)
				}
			} else if got != 1 || status != websocket.StatusNormalClosure {
				t.Fatalf("read %d frames and close %v, want the claimed frame, then 1000", got, status)
			}
			rc.writerEnded(tc.name)
			if tc.window > 0 && !tc.reason.Abrupt() && r.direct(core.DirectPartial) != 1 {
				t.Fatalf("partial writes %v, want the claimed frame's", r.direct(core.DirectPartial))
			}
		})
	}
}

// TestDirectForwardingAllocatesNothing: a packet routed by a reader with
// nothing more to read and written by it to the receiver's socket (a real
// loopback socket a peer drains) costs no allocation, as a queued one
// does not (TestForwardingAllocatesNothing).
func TestDirectForwardingAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	if !wsframe.DirectWrites() {
		t.Skip("no raw writes here")
	}
	peerEnd, relayEnd := wstest.TCPPair(t)
	go func() { _, _ = io.Copy(io.Discard, peerEnd) }()
	reg := prometheus.NewRegistry()
	c, err := core.New(core.Config{Log: testLogger(), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Allocate("allocs", "id")
	if err != nil {
		t.Fatal(err)
	}
	tr := newConn(c, clock.Real{}, nil, wsframe.NewWriter(relayEnd, false), nil, 0)
	host, client := c.NewConn(nil), c.NewConn(tr) // the client on the socket
	deliver := func(from *core.Conn, msg []byte) {
		b := buf.Get(buf.Headroom + len(msg))
		b.Off = buf.Headroom
		b.End = buf.Headroom + copy(b.B[buf.Headroom:], msg)
		c.Handle(from, b)
	}
	var batch []*buf.Buf
	drain := func(cn *core.Conn) { // the writer (the test): what a full socket left (none, as a rule)
		batch = cn.TakeBatch(batch[:0])
		buf.Release(batch)
	}
	deliver(host, wire.Auth{RoomName: "allocs", ClientSecret: a.HostSecret}.Marshal())
	deliver(client, wire.Auth{RoomName: "allocs", ClientSecret: a.Pub.ClientSecret}.Marshal())
	drain(host)
	drain(client) // the answer [3]
	drain(client) // nothing left: the writer is idle
	host.SetDirect(true)
	toClient := sendOne(client.ID(), string(make([]byte, 64)))
	if n := testing.AllocsPerRun(1000, func() {
		deliver(host, toClient)
		drain(client)
	}); n != 0 {
		t.Errorf("SEND_ONE written by its reader: %v allocations per packet", n)
	}
	whole := (&rig{tb: t, reg: reg}).metric("purrfly_relay_direct_writes_total", "result", "whole")
	if whole < 1000 {
		t.Errorf("%v packets written by their reader, want most of 1001", whole)
	}
}
