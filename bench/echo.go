package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// The baseline: a plain coder/websocket echo server. Each connection is one
// goroutine that reads a message into a pooled buffer and writes it back:
// one read and one write per message, the work a relay's forward costs.
// Only the first message differs: it is taken as PurrNet's authentication
// and answered with a 3, so the load generator connects to both servers
// with the same client.Client. The auth is not checked.

// echoAuthTimeout bounds the first message.
const echoAuthTimeout = 10 * time.Second

// echoBufs holds the read buffers; a buffer is held only while a message
// is being echoed.
var echoBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func serveEcho(ctx context.Context, stdout io.Writer, log *slog.Logger) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("failed to listen: %w", err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { echoConn(w, r, log) }),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer srv.Close()
	if err := printReady(stdout, "ws://"+ln.Addr().String()); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("echo server stopped: %w", err)
	}
}

func echoConn(w http.ResponseWriter, r *http.Request, log *slog.Logger) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(wire.MaxMessageSize + 64)
	actx, cancel := context.WithTimeout(r.Context(), echoAuthTimeout)
	_, _, err = ws.Read(actx)
	if err == nil {
		err = ws.Write(actx, websocket.MessageBinary, []byte{wire.Authenticated})
	}
	cancel()
	if err != nil {
		return
	}
	// Background: coder/websocket arms no timer per read or write.
	ctx := context.Background()
	for {
		typ, rd, err := ws.Reader(ctx)
		if err != nil {
			return
		}
		bp := echoBufs.Get().(*[]byte)
		b, err := readAll(rd, (*bp)[:0])
		if err == nil {
			err = ws.Write(ctx, typ, b)
		}
		*bp = b[:0]
		echoBufs.Put(bp)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && websocket.CloseStatus(err) == -1 {
				log.Debug("echo connection ended", "err", err)
			}
			return
		}
	}
}

// readAll reads r to EOF, appending to b (growing it only if needed).
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
