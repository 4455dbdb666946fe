package litenet

import (
	"testing"
)

// refuseFlusher refuses every new peer and records any Handler.Flush call:
// a refused peer is "owed nothing more" (Handler.Connected's doc), and the
// relay's Flush type-asserts p.Tag, which a refused peer never got.
type refuseFlusher struct {
	*recorder
	flushed chan *Peer
}

func (r *refuseFlusher) Flush(p *Peer) bool {
	r.flushed <- p
	return false
}

// A refused peer gets no Handler.Flush: the relay's udpTransport.Flush
// would panic on its nil Tag (p.Tag.(*udpConn)).
func TestRefusedPeerIsNotFlushed(t *testing.T) {
	rec := newRecorder(false)
	rec.refuse.Store(true)
	h := &refuseFlusher{recorder: rec, flushed: make(chan *Peer, 16)}
	e := listen(t, Config{Handler: h})
	raw := newRaw(t, e.LocalAddr())
	raw.send(connectRequest(0, 10, "PurrNet"))
	raw.mustRecv(wait)
	raw.send([]byte{byte(PropUnreliable), 'a'})
	rec.waitKind(t, "connected", wait)
	nextOf(t, raw, PropDisconnect) // the refusal went out: the flush that sent it is done
	settle(t, e)
	select {
	case p := <-h.flushed:
		t.Fatalf("Handler.Flush called for a refused peer (Tag %v)", p.Tag)
	default:
	}
}
