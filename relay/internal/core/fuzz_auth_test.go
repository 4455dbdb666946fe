package core

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// FuzzCoreAuth feeds an arbitrary first message to a new connection, over
// WebSocket and UDP framing: nothing panics, the answer is exactly one
// frame, [3] (the host or a client of the room), [4] (and the connection
// closes) or [5][id] (a pipe), and the core stays consistent
// (ConsistencyCheck). Each input gets a fresh room; @room@, @client@ and
// @host@ in it stand for that room's name and credentials, so that the
// fuzzer reaches the successful paths too.
func FuzzCoreAuth(f *testing.F) {
	for _, m := range []wire.Auth{
		{RoomName: "@room@", ClientSecret: "@client@"},
		{RoomName: "@room@", ClientSecret: "@host@", NAT: true},
		{RoomName: "@room@", ClientSecret: "wrong"},
		{RoomName: "other", ClientSecret: "@client@"},
		{Pipe: true},
		{RoomName: "@room@", ClientSecret: "@client@", ProvisionalHostSecret: "@host@"},
	} {
		f.Add(uint8(0), m.Marshal())
	}
	f.Add(uint8(1), []byte(`{"roomName":"@room@","clientSecret":"@client@","nat":true}`))
	f.Add(uint8(2), []byte(`{"roomName":"@room@","clientSecret":"@client@","nat":true}`))
	f.Add(uint8(1), []byte(`{"roomName":"@room@","clientSecret":"@host@","pipe":false}`))
	f.Add(uint8(0), []byte{1, 2, 0, 0, 0})
	c := testCore(f, nil)
	cr := &coreRoom{core: c, udp: map[*Conn]bool{}}
	n := 0
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		if len(b) > wire.MaxMessageSize {
			return
		}
		n++
		name := "fuzz-" + strconv.Itoa(n)
		a, err := c.Allocate(name, "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if r := c.rooms.get(name); r != nil {
				c.EndRoom(r, ReasonRoomGone)
			}
		}()
		b = bytes.ReplaceAll(b, []byte("@room@"), []byte(name))
		b = bytes.ReplaceAll(b, []byte("@client@"), []byte(a.Pub.ClientSecret))
		b = bytes.ReplaceAll(b, []byte("@host@"), []byte(a.HostSecret))
		udp := which&1 != 0
		if which&2 != 0 { // the room is hosted already
			h := c.NewConn(nil)
			cr.udp[h] = udp
			defer delete(cr.udp, h)
			defer c.Leave(h)
			cr.deliver(h, wire.Auth{RoomName: name, ClientSecret: a.HostSecret}.Marshal())
			if h.role != RoleHost || cr.drain(h) != 1 {
				t.Fatal("the host did not authenticate")
			}
		}
		cn := c.NewConn(nil)
		cr.udp[cn] = udp
		defer delete(cr.udp, cn)
		defer c.Leave(cn)
		cr.deliver(cn, b)
		cr.batch = cn.TakeBatch(cr.batch[:0])
		frames := make([][]byte, len(cr.batch))
		for i, x := range cr.batch {
			frames[i] = append([]byte(nil), x.Frame()...)
			buf.Put(x)
			cr.batch[i] = nil
		}
		// A client of a hosted room may first get the NAT introduction.
		if len(frames) == 2 && cn.role == RoleClient && len(frames[0]) > 1 && frames[0][0] == wire.ToHostNATIntroduce {
			frames = frames[1:]
		}
		if len(frames) != 1 {
			t.Fatalf("%d answers to %q", len(frames), b)
		}
		switch ans := frames[0]; {
		case len(ans) == 1 && ans[0] == wire.Authenticated:
			if cn.role != RoleClient && cn.role != RoleHost || cn.room == nil || cn.closing.Load() {
				t.Fatalf("authenticated %q with role %v", b, cn.role)
			}
		case len(ans) == 1 && ans[0] == wire.AuthFailed:
			if !cn.closing.Load() || cn.role != RoleNone {
				t.Fatalf("a failed authentication %q left the connection open (role %v)", b, cn.role)
			}
		case len(ans) == 5 && ans[0] == wire.PipeAuthenticated:
			if cn.role != RolePipe || wire.ConnID(binary.LittleEndian.Uint32(ans[1:])) != cn.id {
				t.Fatalf("pipe answer %x for conn %d role %v", ans, cn.id, cn.role)
			}
		default:
			t.Fatalf("answer %x to %q", ans, b)
		}
		if err := c.ConsistencyCheck(); err != nil {
			t.Fatal(err)
		}
	})
}
