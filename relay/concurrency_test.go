package relay

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// TestManyRoomsConcurrently: 20 rooms of 10 clients; every client sends
// numbered packets to its host, which echoes each back with SEND_ONE. Every
// packet must come back, in order, to the right client only.
func TestManyRoomsConcurrently(t *testing.T) {
	const rooms, clients, packets = 20, 10, 20
	s := startRelay(t, Options{})
	var wg sync.WaitGroup
	errc := make(chan error, rooms*(clients+1))
	for r := range rooms {
		name := fmt.Sprintf("room-%d", r)
		hs, cs := mustAllocate(t, s, name)
		host := join(t, s, name, hs)
		peers := make([]*wstest.Peer, clients)
		for i := range peers {
			peers[i] = join(t, s, name, cs)
			host.ExpectToHost(wire.ToHostConnected)
		}
		// The host echoes clients*packets packets.
		wg.Go(func() {
			for range clients * packets {
				ctx, cancel := contextWithTimeout(10 * time.Second)
				_, b, err := host.WS.Read(ctx)
				cancel()
				if err != nil {
					errc <- fmt.Errorf("%s host: %w", name, err)
					return
				}
				pk, err := wire.ParseToHostPacket(b)
				if err != nil || pk.Type != wire.ToHostData {
					errc <- fmt.Errorf("%s host got %v", name, b)
					return
				}
				ctx, cancel = contextWithTimeout(10 * time.Second)
				err = host.WS.Write(ctx, websocket.MessageBinary, wire.AppendSendOne(nil, pk.IDs[0], pk.Payload))
				cancel()
				if err != nil {
					errc <- err
					return
				}
			}
		})
		for i, p := range peers {
			wg.Go(func() {
				msg := make([]byte, 8)
				binary.LittleEndian.PutUint32(msg, uint32(r*1000+i))
				for n := range packets {
					binary.LittleEndian.PutUint32(msg[4:], uint32(n))
					ctx, cancel := contextWithTimeout(10 * time.Second)
					err := p.WS.Write(ctx, websocket.MessageBinary, msg)
					if err == nil {
						var b []byte
						_, b, err = p.WS.Read(ctx)
						if err == nil && (len(b) != 8 || binary.LittleEndian.Uint32(b) != uint32(r*1000+i) ||
							binary.LittleEndian.Uint32(b[4:]) != uint32(n)) {
							err = fmt.Errorf("client %d of %s got %v at %d", i, name, b, n)
						}
					}
					cancel()
					if err != nil {
						errc <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if st := s.Stats(); st.Rooms != rooms || st.Connections != rooms*(clients+1) {
		t.Fatalf("stats %+v", st)
	}
	if err := s.ConsistencyCheck(); err != nil {
		t.Fatal(err)
	}
}

func TestAuthTimeout(t *testing.T) {
	s := startRelay(t, Options{AuthTimeout: 100 * time.Millisecond})
	p := wstest.Dial(t, s.WSURL())
	p.Closed()
	waitFor(t, "auth timeout counted", func() bool { return disconnects(t, s, core.ReasonAuthTimeout) == 1 })
}
