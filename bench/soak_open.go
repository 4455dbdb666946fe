package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/purrfly/purrfly/client"
)

// slowlorisRequest is a request cut short: no blank line ever ends it.
const slowlorisRequest = "GET / HTTP/1.1\r\nHost: soak\r\nUpgrade: websocket\r\nX-Soak: "

// open opens one connection of kind from source src (a client of rm).
// A connection the relay must close gets a watcher, which reports on
// r.close when the relay closes it, or -1 past its deadline (and closes
// it then). Nothing but a setup failure of the whole round is returned:
// one connection's failure is counted.
func (r *round) open(ctx context.Context, kind string, src int, rm *soakRoom) error {
	start := time.Now()
	switch kind {
	case kindSilent, kindSlowloris:
		// Silent ones on the HTTP port, slowloris on the WebSocket one.
		addr := r.wsAddr
		if kind == kindSilent {
			addr = r.httpAddr
		}
		c, err := r.dialers[src].DialContext(ctx, "tcp", addr)
		if err != nil {
			r.failed(kind, err)
			return nil
		}
		if kind == kindSlowloris {
			if _, err := io.WriteString(c, slowlorisRequest); err != nil {
				_ = c.Close()
				r.failed(kind, err)
				return nil
			}
		}
		r.keep(kind, nil)
		r.watch(start, func(deadline time.Time) error {
			_ = c.SetReadDeadline(deadline)
			// EOF or a reset: the relay closed it.
			if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
				return err
			}
			return nil
		}, func() { _ = c.Close() })
	case kindUnauthed:
		raw, err := client.DialRaw(ctx, r.wsURL, &client.DialOptions{HTTPClient: r.srcs[src]})
		if err != nil {
			r.failed(kind, err)
			return nil
		}
		r.keep(kind, nil)
		r.watch(start, func(deadline time.Time) error {
			rctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			for {
				if _, err := raw.Read(rctx); err != nil {
					if rctx.Err() != nil {
						return rctx.Err()
					}
					return nil
				}
			}
		}, func() { _ = raw.CloseNow() })
	case kindDeaf:
		raw, err := client.DialRaw(ctx, r.wsURL, &client.DialOptions{HTTPClient: r.srcs[src]})
		if err != nil {
			r.failed(kind, err)
			return nil
		}
		r.keep(kind, func() { _ = raw.CloseNow() })
		if err := raw.WriteBinary(ctx, client.AuthMessage(rm.name, rm.join.Secret, false)); err != nil {
			r.failed(kind, err)
		}
	case kindPlayer:
		c, err := client.DialClient(ctx, rm.join, rm.name, &client.DialOptions{HTTPClient: r.srcs[src]})
		if err != nil {
			r.failed(kind, err)
			return nil
		}
		r.keep(kind, func() { _ = c.CloseNow() })
		if err := r.play(ctx, c); err != nil {
			r.failed(kind, err)
		}
	}
	return nil
}

// play sends its host a ping and reads (past the host's burst) its pong.
func (r *round) play(ctx context.Context, c *client.Client) error {
	if err := c.Send(ctx, pingMsg); err != nil {
		return err
	}
	for range deafBurst + 1 {
		b, err := c.Recv(ctx)
		if err != nil {
			return err
		}
		if string(b) == string(pongMsg) {
			r.mu.Lock()
			r.rd.Played++
			r.mu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("no pong after %d messages", deafBurst+1)
}

// watch waits, in its own goroutine, for the relay to close a connection
// opened at start: wait returns nil when it did, an error at the
// deadline (then drop closes it and the watcher reports -1).
func (r *round) watch(start time.Time, wait func(deadline time.Time) error, drop func()) {
	r.mu.Lock()
	r.watchers++
	r.mu.Unlock()
	deadline := start.Add(r.o.SoakTimeout + soakGrace)
	go func() {
		err := wait(deadline)
		d := time.Since(start)
		drop()
		if err != nil {
			d = -1
		}
		r.close <- d
	}()
}
