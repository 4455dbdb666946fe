package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestHostPacketRoundTrip(t *testing.T) {
	b := AppendSendOne(nil, 0x01020304, []byte("hi"))
	want := []byte{1, 4, 3, 2, 1, 'h', 'i'}
	if !bytes.Equal(b, want) {
		t.Fatalf("SEND_ONE bytes = %v, want %v", b, want)
	}
	p, err := ParseHostPacket(b)
	if err != nil || p.Type != HostSendOne || p.Target != 0x01020304 || string(p.Payload) != "hi" {
		t.Fatalf("parse = %+v, %v", p, err)
	}
	k, err := ParseHostPacket(AppendKick(nil, 7))
	if err != nil || k.Type != HostKick || k.Target != 7 {
		t.Fatalf("kick = %+v, %v", k, err)
	}
	if p, err := ParseHostPacket([]byte{0}); err != nil || p.Type != HostKeepAlive {
		t.Fatalf("keepalive = %+v, %v", p, err)
	}
}

func TestHostPacketRejects(t *testing.T) {
	cases := []struct {
		in   []byte
		want error
	}{
		{nil, ErrEmptyPacket},
		{[]byte{1, 1, 0, 0}, ErrTruncatedPacket},
		{[]byte{2, 1}, ErrTruncatedPacket},
		{[]byte{2, 1, 0, 0, 0, 9}, ErrTruncatedPacket},
		{[]byte{9, 1, 2, 3, 4}, ErrUnknownPacket},
	}
	for _, c := range cases {
		if _, err := ParseHostPacket(c.in); !errors.Is(err, c.want) {
			t.Errorf("ParseHostPacket(%v) = %v, want %v", c.in, err, c.want)
		}
	}
}

func TestToHostPackets(t *testing.T) {
	b := AppendConnected(nil, 1, 2, 300)
	if !bytes.Equal(b, []byte{0, 1, 0, 0, 0, 2, 0, 0, 0, 44, 1, 0, 0}) {
		t.Fatalf("connected bytes = %v", b)
	}
	p, err := ParseToHostPacket(b)
	if err != nil || len(p.IDs) != 3 || p.IDs[2] != 300 {
		t.Fatalf("connected = %+v, %v", p, err)
	}
	p, err = ParseToHostPacket(AppendDisconnected(nil, 5))
	if err != nil || p.Type != ToHostDisconnected || p.IDs[0] != 5 {
		t.Fatalf("disconnected = %+v, %v", p, err)
	}
	p, err = ParseToHostPacket(AppendHostData(nil, 6, []byte{9, 9}))
	if err != nil || p.Type != ToHostData || p.IDs[0] != 6 || !bytes.Equal(p.Payload, []byte{9, 9}) {
		t.Fatalf("data = %+v, %v", p, err)
	}
	if _, err := ParseToHostPacket([]byte{0, 1, 0}); !errors.Is(err, ErrTruncatedPacket) {
		t.Fatalf("short connected: %v", err)
	}
}

func TestPipe(t *testing.T) {
	b := AppendPipe(nil, 42, []byte("x"))
	id, data, err := ParsePipe(b)
	if err != nil || id != 42 || string(data) != "x" {
		t.Fatalf("pipe = %d %q %v", id, data, err)
	}
	if !bytes.Equal(AppendPipeAuthenticated(nil, 1), []byte{5, 1, 0, 0, 0}) {
		t.Fatal("pipe auth reply layout")
	}
	if _, _, err := ParsePipe([]byte{1, 2}); !errors.Is(err, ErrTruncatedPacket) {
		t.Fatal("short pipe accepted")
	}
}

func BenchmarkParseHostPacket(b *testing.B) {
	pkt := AppendSendOne(nil, 12, make([]byte, 64))
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHostPacket(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendHostData(b *testing.B) {
	payload := make([]byte, 64)
	buf := make([]byte, 0, 128)
	b.SetBytes(int64(len(payload) + 5))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendHostData(buf[:0], 12, payload)
	}
}
