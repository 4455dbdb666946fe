package client

import (
	"io"
	"strings"
	"testing"
)

// FuzzEventStream: any bytes end in an error (io.EOF at the end), never a
// panic or a hang, and every event returned came from a data line.
func FuzzEventStream(f *testing.F) {
	for _, s := range []string{
		"id: 1\nevent: stats\ndata: {\"type\":\"stats\",\"seq\":1}\n\n",
		": ping\n\n",
		"data: {\"type\":\"room.create\"}\r\n\r\n",
		"data: {\ndata: }\n\n",
		"data: not json\n\n",
		"event: x\n\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s := NewEventStream(io.NopCloser(strings.NewReader(in)))
		for i := 0; ; i++ {
			fr, err := s.Next()
			if err != nil {
				return
			}
			if fr.Comment == "" && fr.Event.Type != "" && !strings.Contains(in, "data") {
				t.Fatalf("an event without a data line from %q", in)
			}
			if i > len(in) {
				t.Fatalf("more frames than bytes from %q", in)
			}
		}
	})
}
