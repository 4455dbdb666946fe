package flysim

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// maxLinkConns bounds the connections one link carries at once; a new one
// past it is closed at once.
const maxLinkConns = 512

// LinkConfig is a fault-injectable TCP path to an app's proxy ([[links]]):
// a machine whose env says {link:NAME} where it would say {url:APP} reaches
// the app through it, so the path can be delayed, cut or partitioned
// (NetFault) while everything else keeps working. Fly's network fails in
// these ways too; its proxy does not let you choose when.
type LinkConfig struct {
	Name string `toml:"name"`
	// App is the app whose public proxy the link leads to.
	App string `toml:"app"`
	// Listen is the link's own address (default 127.0.0.1:0).
	Listen string `toml:"listen"`
}

func (c *Config) validateLinks() error {
	seen := map[string]bool{}
	apps := map[string]bool{}
	for _, a := range c.Apps {
		apps[a.Name] = true
	}
	for _, l := range c.Links {
		if l == nil || !appNameRE.MatchString(l.Name) || seen[l.Name] {
			return fmt.Errorf("link name %q is missing, malformed or used twice", linkName(l))
		}
		seen[l.Name] = true
		if !apps[l.App] {
			return fmt.Errorf("link %s: unknown app %q", l.Name, l.App)
		}
		if l.Listen == "" {
			l.Listen = "127.0.0.1:0"
		}
		if _, _, err := net.SplitHostPort(l.Listen); err != nil {
			return fmt.Errorf("link %s: bad listen address %q: %w", l.Name, l.Listen, err)
		}
	}
	return nil
}

func linkName(l *LinkConfig) string {
	if l == nil {
		return ""
	}
	return l.Name
}

// linkMode is a link's current fault. The zero value passes everything.
type linkMode struct {
	kind  string // "", NetLinkDelay, NetLinkDrop, NetLinkPartition
	delay time.Duration
	until time.Time
}

// link is one running LinkConfig: an accept loop and, per connection, two
// copy goroutines that ask gate() before passing each chunk.
type link struct {
	// Static after startLink.
	s      *Sim
	cfg    *LinkConfig
	ln     net.Listener
	url    string
	target string // host:port of the app's proxy

	mu      sync.Mutex // guards mode, changed, conns
	mode    linkMode
	changed chan struct{} // closed and replaced when mode changes
	conns   map[net.Conn]struct{}
}

func startLink(s *Sim, cfg *LinkConfig, target string) (*link, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("failed to bind link %s on %s: %w", cfg.Name, cfg.Listen, err)
	}
	l := &link{s: s, cfg: cfg, ln: ln, url: "http://" + ln.Addr().String(), target: target,
		changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go l.accept()
	return l, nil
}

func (l *link) accept() {
	defer l.s.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.s.log.Warn("link stopped", "link", l.cfg.Name, "err", err)
			}
			return
		}
		if !l.track(c) {
			_ = c.Close()
			continue
		}
		l.s.wg.Add(1)
		go l.serve(c)
	}
}

// track adds c to the open connections unless the link is full, cutting
// (drop) or closing.
func (l *link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= maxLinkConns || l.s.ctx.Err() != nil || l.activeLocked().kind == NetLinkDrop {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *link) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		delete(l.conns, c)
		_ = c.Close()
	}
}

// activeLocked is the mode now (an expired one is the zero mode).
func (l *link) activeLocked() linkMode {
	if l.mode.kind != "" && !l.s.clk.Now().Before(l.mode.until) {
		return linkMode{}
	}
	return l.mode
}

// serve dials the target once the link lets anything through (a
// partitioned link holds the connection unanswered, as a black hole does)
// and pipes both ways.
func (l *link) serve(c net.Conn) {
	defer l.s.wg.Done()
	if !l.gate() {
		l.untrack(c)
		return
	}
	up, err := net.DialTimeout("tcp", l.target, 5*time.Second)
	if err != nil {
		l.untrack(c)
		return
	}
	if !l.track(up) {
		_ = up.Close()
		l.untrack(c)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pipe(up, c) }()
	go func() { defer wg.Done(); l.pipe(c, up) }()
	wg.Wait()
	l.untrack(c, up)
}

// pipe copies src to dst through gate until either side ends; then both
// end (a half-closed HTTP connection is of no use here).
func (l *link) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate waits while the link is partitioned, sleeps a delay, and reports
// false when the link is cut or the Sim is closing.
func (l *link) gate() bool {
	for {
		l.mu.Lock()
		m, ch := l.activeLocked(), l.changed
		l.mu.Unlock()
		var wait time.Duration
		switch m.kind {
		case "":
			return true
		case NetLinkDrop:
			return false
		case NetLinkDelay:
			wait = m.delay
		case NetLinkPartition:
			wait = m.until.Sub(l.s.clk.Now())
		}
		t := l.s.clk.NewTimer(max(wait, time.Millisecond))
		select {
		case <-l.s.ctx.Done():
			t.Stop()
			return false
		case <-ch: // the mode changed: look again
			t.Stop()
			continue
		case <-t.C():
		}
		if m.kind == NetLinkDelay {
			return true
		}
	}
}

// set changes the link's mode; a drop also cuts every open connection.
func (l *link) set(m linkMode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mode = m
	close(l.changed)
	l.changed = make(chan struct{})
	if m.kind == NetLinkDrop {
		for c := range l.conns {
			_ = c.Close()
		}
	}
}

func (l *link) close() error {
	err := l.ln.Close()
	l.mu.Lock()
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("failed to close link %s: %w", l.cfg.Name, err)
	}
	return nil
}

// linkAddr is host:port of an http:// URL.
func hostPortOf(url string) string { return strings.TrimPrefix(url, "http://") }
