//go:build unix

package flysim

import (
	"context"
	"encoding/json"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/purrfly/purrfly/internal/testutil"
)

// waitRoutable waits until every machine of app passes its checks.
func waitRoutable(t *testing.T, s *Sim, app string) []string {
	t.Helper()
	ids := machineIDs(s, app)
	for _, id := range ids {
		testutil.Eventually(t, 10*time.Second, "machine "+id+" routable", func() bool { return routable(s, app, id) })
	}
	return ids
}

// TestProxyHeadersAndBalancing: Fly's request headers, edge-region
// preference, fly-prefer-region, fly-force-region, and checks gating.
func TestProxyHeadersAndBalancing(t *testing.T) {
	s := startSim(t, testConfig())
	ids := waitRoutable(t, s, "web") // ids[0] in ams (the edge), ids[1] in sea
	url := s.AppURL("web")

	status, body := get(t, url+"/ping", map[string]string{"X-Forwarded-For": "203.0.113.7", "Fly-Replay-Src": "instance=forged"})
	var p pingInfo
	if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("GET /ping: %d %s", status, body)
	}
	h := p.Headers
	if h["Fly-Client-IP"] != "127.0.0.1" || h["Fly-Region"] != "ams" || h["X-Forwarded-For"] != "203.0.113.7, 127.0.0.1" ||
		h["X-Forwarded-Proto"] != "http" || h["Fly-Replay-Src"] != "" || !strings.Contains(h["Via"], "fly.io") {
		t.Fatalf("headers seen by the machine: %v", h)
	}
	for i := 0; i < 5; i++ {
		if p := pingVia(t, url, nil); p.MachineID != ids[0] {
			t.Fatalf("a request without hints went to %s (%s), not the edge region's machine", p.MachineID, p.Region)
		}
		if p := pingVia(t, url, map[string]string{"fly-prefer-region": "sea"}); p.MachineID != ids[1] {
			t.Fatalf("fly-prefer-region sea went to %s", p.MachineID)
		}
	}
	if status, _ := get(t, url+"/ping", map[string]string{"fly-force-region": "fra"}); status != http.StatusServiceUnavailable {
		t.Fatalf("fly-force-region fra: %d, want 503", status)
	}
	// A failing check takes the machine out of the pool.
	get(t, url+"/sick", map[string]string{"fly-force-instance-id": ids[0]})
	testutil.Eventually(t, 10*time.Second, "sick machine out of the pool", func() bool { return !routable(s, "web", ids[0]) })
	for i := 0; i < 5; i++ {
		if p := pingVia(t, url, nil); p.MachineID != ids[1] {
			t.Fatalf("request reached %s whose check fails", p.MachineID)
		}
	}
}

func pingVia(t *testing.T, url string, hdr map[string]string) pingInfo {
	t.Helper()
	status, body := get(t, url+"/ping", hdr)
	var p pingInfo
	if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("GET /ping: %d %s", status, body)
	}
	return p
}

// TestProxyFlyReplay: machine 1 replays to machine 2, which gets the
// original request (body included) with Fly-Replay-Src naming machine 1; a
// second Fly-Replay is refused with a clear 502.
func TestProxyFlyReplay(t *testing.T) {
	s := startSim(t, testConfig())
	ids := waitRoutable(t, s, "web")
	url := s.AppURL("web")

	req, _ := http.NewRequest(http.MethodPost, url+"/replay?to="+ids[1]+"&state=st8", strings.NewReader("payload-123"))
	req.Header.Set("fly-force-instance-id", ids[0])
	resp, err := httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var p pingInfo
	err = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("replayed request: %d %v", resp.StatusCode, err)
	}
	if p.MachineID != ids[1] || p.Body != "payload-123" {
		t.Fatalf("replay reached %s with body %q", p.MachineID, p.Body)
	}
	src := map[string]string{}
	for _, f := range strings.Split(p.Headers["Fly-Replay-Src"], ";") {
		k, v, _ := strings.Cut(f, "=")
		src[k] = v
	}
	micros, _ := strconv.ParseInt(src["t"], 10, 64)
	if src["instance"] != ids[0] || src["region"] != "ams" || src["state"] != "st8" ||
		time.Since(time.UnixMicro(micros)).Abs() > 10*time.Second {
		t.Fatalf("Fly-Replay-Src = %q", p.Headers["Fly-Replay-Src"])
	}

	status, body := get(t, url+"/replay-always?to="+ids[1], map[string]string{"fly-force-instance-id": ids[0]})
	if status != http.StatusBadGateway || !strings.Contains(string(body), "already replayed") {
		t.Fatalf("second replay: %d %s, want a 502", status, body)
	}
	// region= and elsewhere=true pick another machine of the app.
	for _, fr := range []string{"region=sea", `region="fra,sea"`, "elsewhere=true"} {
		status, body := get(t, url+"/replay?fr="+neturl.QueryEscape(fr), map[string]string{"fly-force-instance-id": ids[0]})
		if status != http.StatusOK || json.Unmarshal(body, &p) != nil || p.MachineID != ids[1] ||
			!strings.HasPrefix(p.Headers["Fly-Replay-Src"], "instance="+ids[0]+";region=ams;t=") {
			t.Fatalf("Fly-Replay %s: %d %s", fr, status, body)
		}
	}
	// Replaying to a machine that is not there is a clear 503.
	status, body = get(t, url+"/replay?to=00000000000000", map[string]string{"fly-force-instance-id": ids[0]})
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "not started") {
		t.Fatalf("replay to a missing machine: %d %s", status, body)
	}
	// The proxy counts a request once its handler returns, which may be
	// just after the client has read the answer.
	var replayed, refused float64
	settled := testutil.Poll(5*time.Second, func() bool {
		replayed = counterValue(t, s.met.proxyRequests.WithLabelValues("web", "replayed"))
		refused = counterValue(t, s.met.proxyRequests.WithLabelValues("web", "replay_refused"))
		return replayed == 4 && refused == 2
	})
	if !settled {
		t.Fatalf("metrics: replayed %v, refused %v; want 4 and 2", replayed, refused)
	}
}

// TestProxyWebSocketReplay: the upgrade request is replayed before it is
// upgraded; the target machine upgrades and messages flow both ways. Close
// cuts a tunnel still open.
func TestProxyWebSocketReplay(t *testing.T) {
	s := startSim(t, testConfig())
	ids := waitRoutable(t, s, "web")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(s.AppURL("web"), "http") + "/ws?replay_to=" + ids[1]
	dial := func() *websocket.Conn {
		c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{
			HTTPHeader: http.Header{"fly-force-instance-id": {ids[0]}},
			HTTPClient: httpClient(),
		})
		if err != nil {
			t.Fatalf("dial %s: %v (%v)", wsURL, err, resp)
		}
		return c
	}
	c := dial()
	defer c.CloseNow()
	_, hello, err := c.Read(ctx)
	if err != nil || !strings.HasPrefix(string(hello), "hello from "+ids[1]+" src=instance="+ids[0]+";") {
		t.Fatalf("hello = %q, %v", hello, err)
	}
	for i := 0; i < 20; i++ {
		msg := "packet-" + strconv.Itoa(i)
		if err := c.Write(ctx, websocket.MessageBinary, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != ids[1]+":"+msg {
			t.Fatalf("echo %d = %q, %v", i, got, err)
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}

	// A tunnel still open when the Sim closes is cut.
	c2 := dial()
	defer c2.CloseNow()
	if _, _, err := c2.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.Read(ctx); err == nil {
		t.Fatal("tunnel still open after Close")
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
