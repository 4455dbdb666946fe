package wstest

import (
	"bytes"
	"io"
	"testing"
)

// TestReadRawFrameUnmasksAClientFrame: a frame MaskedFrame wrote reads back
// as one final, masked binary frame carrying the same bytes.
func TestReadRawFrameUnmasksAClientFrame(t *testing.T) {
	p := []byte("hello, relay")
	f, err := ReadRawFrame(bytes.NewReader(MaskedFrame(p)))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Fin || f.Op != 0x2 || !f.Masked || !bytes.Equal(f.Payload, p) {
		t.Fatalf("read fin %v op %d masked %v %q, want a final masked binary %q", f.Fin, f.Op, f.Masked, f.Payload, p)
	}
}

// TestReadRawFrameLengths: the 16- and 64-bit extended lengths are read,
// a frame over 1 MiB is refused, and a short frame is an error.
func TestReadRawFrameLengths(t *testing.T) {
	long := bytes.Repeat([]byte{7}, 300)
	f, err := ReadRawFrame(bytes.NewReader(append([]byte{0x82, 126, 0x01, 0x2c}, long...)))
	if err != nil || !bytes.Equal(f.Payload, long) || f.Masked {
		t.Fatalf("a 300-byte server frame: %d bytes, masked %v, %v", len(f.Payload), f.Masked, err)
	}
	huge := []byte{0x82, 127, 0, 0, 0, 0, 0, 0x20, 0, 0}
	if _, err := ReadRawFrame(bytes.NewReader(huge)); err == nil {
		t.Fatal("a 2 MiB frame was read")
	}
	if _, err := ReadRawFrame(bytes.NewReader([]byte{0x82, 5, 'a'})); err != io.ErrUnexpectedEOF {
		t.Fatalf("a short frame: %v, want io.ErrUnexpectedEOF", err)
	}
}
