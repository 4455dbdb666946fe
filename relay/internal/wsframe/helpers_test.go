package wsframe

import (
	"context"
	"flag"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/lockrank"
)

func TestMain(m *testing.M) {
	lockrank.EnableForTests()
	goleak.VerifyTestMain(m)
}

// testBatch is the most frames a connection's writer takes at once (the
// core's maxBatch): what the writers' tests write in one batch.
const testBatch = 64

// link is a test's link: coder/websocket's client and the Writer its
// upgrade went over.
type link struct {
	ws *websocket.Conn
	lc *Writer
}

// dialLink dials url as the relay dials a link: through client, whose
// transport dials with DialContext, keeping the Writer the upgrade went
// over (Upgraded).
func dialLink(ctx context.Context, client *http.Client, url string) (*link, error) {
	var nc net.Conn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { nc = info.Conn },
	})
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:      client,
		CompressionMode: websocket.CompressionDisabled,
	})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	return &link{ws: ws, lc: Upgraded(nc)}, nil
}

// TestLockOrderIsChecked: this package's tests run with the lock-rank
// checker on (internal/lockrank), benchmarks aside.
func TestLockOrderIsChecked(t *testing.T) {
	if flag.Lookup("test.bench").Value.String() == "" && !lockrank.Enabled() {
		t.Fatal("the lock-rank checker is off")
	}
}
