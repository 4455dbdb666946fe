package balancer

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

// TestRefusedRelayCallsAreLogged: a relay registering with a wrong SECRET
// is refused (401) and the balancer says so in its log, paced to one line
// per internalAuthLogGap with the count of refusals since the last one,
// and never with the secret it was sent.
func TestRefusedRelayCallsAreLogged(t *testing.T) {
	var sink testutil.Buffer
	h := newHarness(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&sink, nil)) })
	wrong := map[string]string{wire.HeaderInternalSecret: "stale-secret-value"}
	for range 3 {
		st, body, _ := h.do(http.MethodPost, wire.PathRegister, wrong, []byte(`{}`))
		wantErrBody(t, st, body, http.StatusUnauthorized, wire.ErrUnauthorized.Code)
	}
	if got := sink.Lines("wrong SECRET"); len(got) != 1 || !strings.Contains(got[0], "refused_since_last_line=1") ||
		!strings.Contains(got[0], "source=127.0.0.1") {
		t.Fatalf("after 3 refusals within the gap, log lines %q: want one, naming the source", got)
	}
	h.clk.Advance(internalAuthLogGap + time.Second)
	h.do(http.MethodPost, wire.PathRegister, wrong, []byte(`{}`))
	got := sink.Lines("wrong SECRET")
	if len(got) != 2 || !strings.Contains(got[1], "refused_since_last_line=3") {
		t.Fatalf("after the gap, log lines %q: want a second one counting the 3 refusals since the first", got)
	}
	if strings.Contains(strings.Join(got, "\n"), "stale-secret-value") {
		t.Fatal("the log shows the secret the relay sent")
	}
}
