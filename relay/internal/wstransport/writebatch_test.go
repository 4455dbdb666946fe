package wstransport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/buf"
)

// TestWriteBatchWithoutFrameConn: a link over TLS has no wsframe.Writer; its
// frames go through coder/websocket one message at a time, all of them, in
// order.
func TestWriteBatchWithoutFrameConn(t *testing.T) {
	got := make(chan string, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for range 3 {
			_, b, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			got <- string(b)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var batch []*buf.Buf
	for _, s := range []string{"one", "two", "three"} {
		b := buf.Get(len(s))
		b.End = copy(b.B, s)
		batch = append(batch, b)
	}
	if !writeBatch(ctx, ws, nil, batch) {
		t.Fatal("writeBatch without a wsframe.Writer failed")
	}
	for _, want := range []string{"one", "two", "three"} {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("got %q, want %q", s, want)
			}
		case <-ctx.Done():
			t.Fatalf("%q never arrived", want)
		}
	}
}
