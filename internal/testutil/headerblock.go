package testutil

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// HeaderBlock sends a GET of path to the HTTP server at addr whose request line
// and headers are exactly size bytes on the wire (a Host and one padding
// field, no optional whitespace), on a new connection or, kept, on one
// that has just served a small request, and returns the answer's status
// and body (status 0 and the error when there is none).
func HeaderBlock(t testing.TB, addr, path string, size int, kept bool) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	if kept {
		if st, body := headerBlock(t, c, br, path, 100); st != http.StatusOK {
			t.Fatalf("the first request on the kept connection: %d %s", st, body)
		}
	}
	return headerBlock(t, c, br, path, size)
}

func headerBlock(t testing.TB, c net.Conn, br *bufio.Reader, path string, size int) (int, string) {
	t.Helper()
	head := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	pad := size - len(head) - len("X-Pad: \r\n") - len("\r\n")
	if pad < 0 {
		t.Fatalf("a %d-byte header block is too small", size)
	}
	if _, err := io.WriteString(c, head+"X-Pad: "+strings.Repeat("a", pad)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
