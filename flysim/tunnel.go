package flysim

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// tunnel is one upgraded (WebSocket) connection piped between a client and
// a machine. Either side ending ends both.
type tunnel struct {
	client  net.Conn
	backend io.ReadWriteCloser
	once    sync.Once
}

func (t *tunnel) close() {
	t.once.Do(func() {
		_ = t.client.Close()
		_ = t.backend.Close()
	})
}

// tunnel completes an upgrade the machine accepted: the 101 goes to the
// client, then bytes flow both ways until either side closes or the Sim
// closes the proxy.
func (p *proxy) tunnel(w http.ResponseWriter, resp *http.Response) {
	backend, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		_ = resp.Body.Close()
		writeFlyError(w, errf(http.StatusBadGateway, "machine switched protocols without a usable connection"))
		return
	}
	p.mu.Lock()
	full := len(p.tunnels) >= maxTunnels
	p.mu.Unlock()
	if full {
		_ = backend.Close()
		writeFlyError(w, errf(http.StatusServiceUnavailable, "too many upgraded connections to app %s", p.app.cfg.Name))
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = backend.Close()
		writeFlyError(w, errf(http.StatusInternalServerError, "failed to take over the connection"))
		return
	}
	t := &tunnel{client: conn, backend: backend}
	if err := writeSwitching(brw.Writer, resp); err != nil {
		t.close()
		return
	}
	p.mu.Lock()
	if p.s.ctx.Err() != nil { // closing: close() may already have swept the set
		p.mu.Unlock()
		t.close()
		return
	}
	p.tunnels[t] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	done := func() {
		t.close()
		p.mu.Lock()
		delete(p.tunnels, t)
		p.mu.Unlock()
		p.wg.Done()
	}
	go func() {
		defer done()
		_, _ = io.Copy(backend, brw.Reader) // what the client already sent is buffered in brw
	}()
	go func() {
		defer done()
		_, _ = io.Copy(conn, backend)
	}()
}

func writeSwitching(bw *bufio.Writer, resp *http.Response) error {
	if _, err := fmt.Fprintf(bw, "HTTP/1.1 101 Switching Protocols\r\n"); err != nil {
		return err
	}
	resp.Header.Add("Via", "1.1 fly.io")
	if err := resp.Header.Write(bw); err != nil {
		return err
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		return err
	}
	return bw.Flush()
}
