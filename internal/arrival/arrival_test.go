package arrival

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// A socket that asked for stamps gets one with each datagram, taken
// between its write and its read; one that did not gets none.
func TestStampsOnARealSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("stamps are Linux's")
	}
	for _, enable := range []bool{true, false} {
		srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if enable {
			rc, err := srv.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			if err := Enable(rc); err != nil {
				t.Fatal(err)
			}
		}
		cli, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		before := time.Now().UnixNano()
		if _, err := cli.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		buf, oob := make([]byte, 64), make([]byte, Space)
		_ = srv.SetReadDeadline(time.Now().Add(5 * time.Second)) // wall clock: a bound on a real socket
		_, oobn, _, _, err := srv.ReadMsgUDPAddrPort(buf, oob)
		after := time.Now().UnixNano()
		if err != nil {
			t.Fatal(err)
		}
		at := Parse(oob[:oobn])
		if enable && (at < before || at > after) || !enable && at != 0 {
			t.Fatalf("stamps %v: got %d, want between %d and %d", enable, at, before, after)
		}
	}
}
