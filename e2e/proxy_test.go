package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// linkProxy sits between a relay and its balancer (the relay's BalancerURL
// points at it). It records every internal request body by path, so a test
// can replay a prior boot's exact requests later, and it can be taken down:
// while down, every connection is dropped without an answer, as if the
// balancer were unreachable.
type linkProxy struct {
	srv  *httptest.Server
	down atomic.Bool

	mu       sync.Mutex
	bodies   map[string][][]byte // guarded by mu: path -> request bodies, in order
	dropped  map[string]int      // guarded by mu: path -> requests dropped while down
	answered map[string]int      // guarded by mu: path -> requests the balancer answered
}

func newLinkProxy(t testing.TB, target string) *linkProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { hangUp(w) }
	p := &linkProxy{bodies: map[string][][]byte{}, dropped: map[string]int{}, answered: map[string]int{}}
	rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		p.answered[resp.Request.URL.Path]++
		p.mu.Unlock()
		return nil
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			p.mu.Lock()
			p.dropped[r.URL.Path]++
			p.mu.Unlock()
			hangUp(w)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			hangUp(w)
			return
		}
		p.mu.Lock()
		p.bodies[r.URL.Path] = append(p.bodies[r.URL.Path], body)
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		p.srv.CloseClientConnections()
		p.srv.Close()
		tr.CloseIdleConnections()
	})
	return p
}

// URL is the proxy's base URL.
func (p *linkProxy) URL() string { return p.srv.URL }

// last returns the latest recorded body for path that contains substr.
func (p *linkProxy) last(path, substr string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	bs := p.bodies[path]
	for i := len(bs) - 1; i >= 0; i-- {
		if strings.Contains(string(bs[i]), substr) {
			return bs[i]
		}
	}
	return nil
}

// answeredCount is how many requests to path the balancer answered.
func (p *linkProxy) answeredCount(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answered[path]
}

// droppedCount is how many requests to path were dropped while down.
func (p *linkProxy) droppedCount(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped[path]
}

// hangUp drops the connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// loseFirst is an http.RoundTripper that delivers requests to path, lets the
// server answer, then throws the first answer away and reports a lost
// connection: the server committed, the caller never learned it.
type loseFirst struct {
	next http.RoundTripper
	path string

	mu   sync.Mutex
	lost []byte // guarded by mu: the body of the answer thrown away
	done bool   // guarded by mu
}

var errLost = errors.New("connection reset (test: answer lost)")

func (l *loseFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || req.URL.Path != l.path {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return resp, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	l.done, l.lost = true, body
	return nil, errLost
}

func (l *loseFirst) lostBody() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}
