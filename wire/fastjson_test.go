package wire

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func relayAllocationSeeds() []RelayAllocation {
	return []RelayAllocation{
		{
			Capability:  Capability{Host: "127.0.0.1", Secret: "host-secret", Port: 44321, UDPPortV2: 7778},
			Publication: Publication{Name: "bench-1a2b-17", Epoch: "0f3c9a", Revision: 1, ClientSecret: "client-secret", AllocationID: "6e1f0c7d9a2b4c8e"},
			BootID:      "relay-boot",
		},
		{
			Capability:  Capability{Host: "relay.fly.dev", Secret: "s", Port: 443, UDPPort: 7777, UDPPortV2: 7778, SSL: true},
			Publication: Publication{Name: "a room name with spaces", Epoch: "e", Revision: 1 << 40, Connections: 3, ClientSecret: "c", Vacant: true},
			BootID:      "b", Replayed: true,
		},
		{Publication: Publication{Name: "moved", MovedFrom: &Incarnation{BootID: "b0", Epoch: "e0"}}},
		{Capability: Capability{Host: "<&>", Secret: "é"}},
		{},
	}
}

// The relay's own answers (json.Marshal, as WriteJSON writes them) take
// the fast path and read as encoding/json reads them; a handed-over
// room's (MovedFrom) and any string that needs an escape go to
// encoding/json.
func TestDecodeRelayAllocationFastPath(t *testing.T) {
	for i, want := range relayAllocationSeeds() {
		b, _ := json.Marshal(want)
		var got RelayAllocation
		s := jscan{b: b}
		fast := s.relayAllocation(&got)
		if wantFast := i < 2 || i == 4; fast != wantFast {
			t.Errorf("seed %d %s: fast path %v, want %v", i, b, fast, wantFast)
		}
		got = RelayAllocation{}
		if err := DecodeRelayAllocation(b, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: %+v, %v; want %+v", i, got, err, want)
		}
	}
}

func TestDecodeRelayAllocationAllocatesOnlyItsStrings(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b, _ := json.Marshal(relayAllocationSeeds()[0])
	n := testing.AllocsPerRun(100, func() {
		var a RelayAllocation
		if err := DecodeRelayAllocation(b, &a); err != nil {
			t.Fatal(err)
		}
	})
	if n > 7 { // host, secret, name, epoch, clientSecret, allocationId, bootId
		t.Errorf("%v allocations, want at most 7 (its strings)", n)
	}
}

// FuzzDecodeRelayAllocation: whatever the body, DecodeRelayAllocation
// gives exactly json.Unmarshal's value and fails exactly when it does.
func FuzzDecodeRelayAllocation(f *testing.F) {
	for _, a := range relayAllocationSeeds() {
		b, _ := json.Marshal(a)
		f.Add(b)
	}
	for _, s := range []string{
		` { "capability" : { "port" : -0 } , "bootId":"x" } `, `{"publication":{"revision":-0}}`,
		`{"capability":{"port":01}}`, `{"capability":{"port":1.0}}`, `{"capability":{"port":1e2}}`,
		`{"capability":{"port":99999999999999999999}}`, `{"capability":{"Host":"x"}}`, `{"capability":null}`,
		`{"bootId":"a","bootId":"b"}`, `{"capability":{"host":"a"},"capability":{"port":2}}`,
		`{"bootId":"\u0041"}`, `{"bootId":"a\tb"}`, `{"replayed":truex}`, `{"replayed":true}x`, `{}`, `[]`, `{`, ``,
		`{"publication":{"movedFrom":null}}`, `{"extra":1}`, `{"capability":{"ssl":"true"}}`, "{\"bootId\":\"\x7f\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want RelayAllocation
		gotErr := DecodeRelayAllocation(b, &got)
		wantErr := json.Unmarshal(b, &want)
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %+v, %v; encoding/json %+v, %v", b, got, gotErr, want, wantErr)
		}
	})
}

// FuzzAppendCapability: AppendCapability writes exactly what
// json.NewEncoder(w).Encode writes.
func FuzzAppendCapability(f *testing.F) {
	f.Add("127.0.0.1", "secret", 443, 0, 7778, false)
	f.Add("<host>&", "s\"e\\c\n", -1, 1<<40, 65535, true)
	f.Add("\xff\u2028é\x7f", "", 0, 0, 0, false)
	f.Fuzz(func(t *testing.T, host, secret string, port, udp, udp2 int, ssl bool) {
		c := Capability{Host: host, Secret: secret, Port: port, UDPPort: udp, UDPPortV2: udp2, SSL: ssl}
		want, _ := json.Marshal(c)
		want = append(want, '\n')
		if got := AppendCapability(nil, c); string(got) != string(want) {
			t.Fatalf("%+v: %s, encoding/json %s", c, got, want)
		}
	})
}

// WriteCapability answers as WriteJSON does: same status, header and bytes.
func TestWriteCapabilityIsWriteJSON(t *testing.T) {
	c := Capability{Host: "relay.example", Secret: "s3cr3t", Port: 443, UDPPortV2: 7778, SSL: true}
	a, b := httptest.NewRecorder(), httptest.NewRecorder()
	WriteCapability(a, http.StatusOK, c)
	WriteJSON(b, http.StatusOK, c)
	if a.Code != b.Code || a.Body.String() != b.Body.String() || !reflect.DeepEqual(a.Header(), b.Header()) {
		t.Errorf("WriteCapability %d %v %q, WriteJSON %d %v %q", a.Code, a.Header(), a.Body, b.Code, b.Header(), b.Body)
	}
}

// BenchmarkDecodeRelayAllocation is one relay answer read by the fast
// path and by encoding/json.
func BenchmarkDecodeRelayAllocation(b *testing.B) {
	body, _ := json.Marshal(relayAllocationSeeds()[0])
	for _, c := range []struct {
		name string
		dec  func([]byte, *RelayAllocation) error
	}{
		{"fast", DecodeRelayAllocation},
		{"encoding-json", func(b []byte, a *RelayAllocation) error { return json.Unmarshal(b, a) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var a RelayAllocation
				if err := c.dec(body, &a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendCapability is one answer's body, appended and encoded
// by encoding/json.
func BenchmarkAppendCapability(b *testing.B) {
	c := relayAllocationSeeds()[0].Capability
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = AppendCapability(buf[:0], c)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var w discard
		for b.Loop() {
			_ = json.NewEncoder(&w).Encode(c)
		}
	})
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }
