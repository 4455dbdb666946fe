package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// FuzzExchangeAuth feeds an arbitrary sequence of relay messages to the
// client's authentication exchange. [4] alone is ErrAuthFailed and closes
// the link; one NAT introduction ([6][token]) before the answer gives the
// token; the first other message is the answer, byte for byte; a link
// that ends first is an error.
func FuzzExchangeAuth(f *testing.F) {
	f.Add([]byte{1, wire.Authenticated})
	f.Add([]byte{1, wire.AuthFailed})
	f.Add([]byte{4, wire.ToHostNATIntroduce, 't', 'o', 'k', 1, wire.Authenticated})
	f.Add([]byte{2, wire.ToHostNATIntroduce, 'a', 2, wire.ToHostNATIntroduce, 'b'})
	f.Add([]byte{5, wire.PipeAuthenticated, 1, 0, 0, 0})
	f.Add([]byte{1, wire.ToHostNATIntroduce, 1, wire.Authenticated})
	f.Add([]byte{0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		// in is [len:1][message] repeated.
		var msgs [][]byte
		for rest := in; len(rest) > 0; {
			n := min(int(rest[0]), len(rest)-1)
			msgs = append(msgs, rest[1:1+n])
			rest = rest[1+n:]
		}
		l := &scriptLink{msgs: msgs}
		got, reply, token, err := exchangeAuth(context.Background(), l, []byte(`{"roomName":"r","clientSecret":"s"}`))
		// What the exchange should see: NAT introductions skipped while no
		// token is known, then the answer.
		var wantToken string
		var answer []byte
		found := false
		for _, m := range msgs {
			if len(m) > 1 && m[0] == wire.ToHostNATIntroduce && wantToken == "" {
				wantToken = string(m[1:])
				continue
			}
			answer, found = m, true
			break
		}
		switch {
		case !found:
			if err == nil || got != nil {
				t.Fatalf("%q: no answer, got %x, %v", msgs, reply, err)
			}
		case len(answer) == 1 && answer[0] == wire.AuthFailed:
			if !errors.Is(err, ErrAuthFailed) || got != nil || !l.closed {
				t.Fatalf("%q: [4] gave %v (closed %v)", msgs, err, l.closed)
			}
		default:
			if err != nil || got != l || !bytes.Equal(reply, answer) || token != wantToken || l.closed {
				t.Fatalf("%q: answer %x token %q, %v; want %x %q", msgs, reply, token, err, answer, wantToken)
			}
		}
	})
}

// scriptLink is a link whose reads return msgs in order, then io.EOF.
type scriptLink struct {
	msgs   [][]byte
	closed bool
}

func (l *scriptLink) write(context.Context, wire.Delivery, []byte) error { return nil }
func (l *scriptLink) read(context.Context) (wire.Delivery, []byte, error) {
	if len(l.msgs) == 0 {
		return 0, nil, io.EOF
	}
	m := l.msgs[0]
	l.msgs = l.msgs[1:]
	return wire.ReliableOrdered, m, nil
}
func (l *scriptLink) readInto(ctx context.Context, buf []byte) (wire.Delivery, int, error) {
	d, m, err := l.read(ctx)
	return d, copy(buf, m), err
}
func (l *scriptLink) close() error    { l.closed = true; return nil }
func (l *scriptLink) closeNow() error { l.closed = true; return nil }
func (l *scriptLink) udp() bool       { return false }
