package flysim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Proxy limits.
const (
	// maxReplayBody is the largest request body the proxy keeps to be able
	// to replay it (Fly: "a request over 1 MB cannot be replayed").
	maxReplayBody = 1 << 20
	// maxTunnels is the most WebSocket (upgraded) connections one app's proxy
	// carries at once (Fly's per-edge, per-app connection cap).
	maxTunnels = 2048
)

// proxy is one app's public entry: it balances HTTP requests and WebSocket
// upgrades over the app's routable machines and honours Fly-Replay once.
type proxy struct {
	// Static after startProxy.
	s         *Sim
	app       *app
	srv       *http.Server
	url       string
	port      string
	transport *http.Transport

	mu      sync.Mutex // guards tunnels
	tunnels map[*tunnel]struct{}
	wg      sync.WaitGroup // tunnel copy goroutines
}

func startProxy(s *Sim, a *app) (*proxy, error) {
	ln, err := net.Listen("tcp", a.cfg.Proxy)
	if err != nil {
		return nil, fmt.Errorf("failed to bind the proxy of %s on %s: %w", a.cfg.Name, a.cfg.Proxy, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln = &dnsGate{Listener: ln, s: s, a: a}
	p := &proxy{
		s: s, app: a, url: "http://" + ln.Addr().String(), port: port,
		tunnels: map[*tunnel]struct{}{},
		transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			ResponseHeaderTimeout: 60 * time.Second,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       30 * time.Second,
			DisableCompression:    true,
		},
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // a proxied WebSocket is hijacked: net/http clears it then
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("proxy stopped", "app", a.cfg.Name, "err", err)
		}
	}()
	return p, nil
}

// close stops accepting, waits for requests in flight (their context is the
// Sim's, already cancelled), then cuts every tunnel.
func (p *proxy) close(ctx context.Context) error {
	err := p.srv.Shutdown(ctx)
	if err != nil {
		_ = p.srv.Close()
	}
	p.mu.Lock()
	for t := range p.tunnels {
		t.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("failed to shut the proxy of %s down: %w", p.app.cfg.Name, err)
	}
	return nil
}

// target is where one attempt of a request goes.
type target struct {
	id, region, addr string
}

// reqBody is a request body kept for replay (rest is nil) or, past
// maxReplayBody, streamed once (rest holds what was not buffered).
type reqBody struct {
	buf    []byte
	rest   io.Reader
	length int64
}

func readBody(r *http.Request) (*reqBody, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return &reqBody{}, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, maxReplayBody+1))
	if err != nil {
		return nil, err
	}
	if len(buf) <= maxReplayBody {
		return &reqBody{buf: buf, length: int64(len(buf))}, nil
	}
	return &reqBody{buf: buf, rest: r.Body, length: r.ContentLength}, nil
}

func (b *reqBody) replayable() bool { return b.rest == nil }

func (b *reqBody) reader() (io.ReadCloser, int64) {
	if b.rest != nil {
		return io.NopCloser(io.MultiReader(bytes.NewReader(b.buf), b.rest)), b.length
	}
	if len(b.buf) == 0 {
		return http.NoBody, 0
	}
	return io.NopCloser(bytes.NewReader(b.buf)), int64(len(b.buf))
}

// ServeHTTP proxies one request: pick a machine, send, and when the answer
// carries Fly-Replay, send the original request once more where it says,
// with Fly-Replay-Src. A second Fly-Replay is answered 502.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outcome := "ok"
	defer func() { p.s.met.proxyRequests.WithLabelValues(p.app.cfg.Name, outcome).Inc() }()
	fail := func(o string, err error) {
		outcome = o
		writeFlyError(w, err)
	}
	w.Header().Set("fly-request-id", newULID(time.Now()))
	r.Header.Del("Fly-Replay-Src") // only the proxy sets it
	body, err := readBody(r)
	if err != nil {
		fail("bad_request", errf(http.StatusBadRequest, "failed to read request body: %v", err))
		return
	}
	first, err := p.pick(r)
	if err != nil {
		fail("no_machine", err)
		return
	}
	resp, err := p.forward(r, body, first, "")
	if err != nil {
		fail("upstream_error", errf(http.StatusBadGateway, "failed to reach machine %s: %v", first.id, err))
		return
	}
	if fr := resp.Header.Get("Fly-Replay"); fr != "" {
		_ = resp.Body.Close()
		if !body.replayable() {
			fail("replay_refused", errf(http.StatusBadGateway, "machine %s asked to replay a request whose body is over %d bytes", first.id, maxReplayBody))
			return
		}
		rp := parseReplay(fr)
		next, err := p.replayTarget(rp, first)
		if err != nil {
			fail("replay_refused", err)
			return
		}
		src := fmt.Sprintf("instance=%s;region=%s;t=%d", first.id, first.region, time.Now().UnixMicro())
		if rp.state != "" {
			src += ";state=" + rp.state
		}
		resp, err = p.forward(r, body, next, src)
		if err != nil {
			fail("upstream_error", errf(http.StatusBadGateway, "failed to reach replay target %s: %v", next.id, err))
			return
		}
		if resp.Header.Get("Fly-Replay") != "" {
			_ = resp.Body.Close()
			fail("replay_refused", errf(http.StatusBadGateway,
				"machine %s answered Fly-Replay to a request already replayed by machine %s; a request is replayed once", next.id, first.id))
			return
		}
		outcome = "replayed"
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if outcome == "ok" {
			outcome = "upgraded"
		}
		p.tunnel(w, resp)
		return
	}
	copyResponse(w, resp)
}

// forward sends one attempt of r to t, with the headers Fly's proxy adds.
func (p *proxy) forward(r *http.Request, body *reqBody, t target, replaySrc string) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "http", t.addr
	out.Host = r.Host
	out.Body, out.ContentLength = body.reader()
	h := out.Header
	upgrade := upgradeType(r.Header)
	removeHopByHop(h)
	if upgrade != "" {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", upgrade)
	}
	clientIP, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		clientIP = r.RemoteAddr
	}
	h.Set("Fly-Client-IP", clientIP)
	h.Set("Fly-Region", p.app.cfg.EdgeRegion)
	if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
		h.Set("X-Forwarded-For", strings.Join(prior, ", ")+", "+clientIP)
	} else {
		h.Set("X-Forwarded-For", clientIP)
	}
	h.Set("X-Forwarded-Proto", "http")
	h.Set("X-Forwarded-Port", p.port)
	h.Set("Fly-Forwarded-Port", p.port)
	h.Add("Via", "1.1 fly.io")
	if replaySrc != "" {
		h.Set("Fly-Replay-Src", replaySrc)
	}
	return p.transport.RoundTrip(out)
}

// hopByHop are the headers a proxy never forwards (RFC 9110 7.6.1).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}

func upgradeType(h http.Header) string {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "upgrade") {
				return h.Get("Upgrade")
			}
		}
	}
	return ""
}

// copyResponse streams a machine's answer to the client, flushing as it goes
// (server-sent events and long polls pass through).
func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	removeHopByHop(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	h.Add("Via", "1.1 fly.io")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
