package wire

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// The two JSON bodies on the balancer's allocation path, read and written
// without reflection when they are in the plain form Go's encoder gives
// them: the relay's RelayAllocation (read once per allocation) and the
// Capability answered to every allocation and join. encoding/json spends
// some 7 us of CPU reading a RelayAllocation, the largest single cost of
// the balancer's own code per allocation; the fast paths take well under
// one. Each fast path accepts only what it can read or write exactly as
// encoding/json does, and hands everything else to encoding/json, so the
// results are encoding/json's in every case (FuzzDecodeRelayAllocation,
// FuzzAppendCapability).

// DecodeRelayAllocation is json.Unmarshal(b, out). Bodies of the form the
// relay sends (every key one of RelayAllocation's own, spelled exactly,
// strings of printable ASCII without escapes, integers, booleans, no
// MovedFrom) are read directly; anything else goes to json.Unmarshal.
func DecodeRelayAllocation(b []byte, out *RelayAllocation) error {
	a := *out
	s := jscan{b: b}
	if s.relayAllocation(&a) {
		*out = a
		return nil
	}
	// A copy, so that out itself does not escape to the heap on the
	// fast path; json.Unmarshal's partial result on an error is kept, as
	// it would be in out.
	x := *out
	err := json.Unmarshal(b, &x)
	*out = x
	return err
}

// jscan reads one JSON value of a known shape from b. Every method reports
// false for anything outside the plain form, and the caller falls back to
// encoding/json.
type jscan struct {
	b []byte
	i int
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// lit consumes byte c after optional whitespace.
func (s *jscan) lit(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// raw reads a string of printable ASCII (and DEL) without escapes and
// returns its bytes: exactly what encoding/json would decode it to.
func (s *jscan) raw() ([]byte, bool) {
	if !s.lit('"') {
		return nil, false
	}
	for j := s.i; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[s.i:j]
			s.i = j + 1
			return v, true
		case c < 0x20 || c == '\\' || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

func (s *jscan) str(dst *string) bool {
	v, ok := s.raw()
	if ok {
		*dst = string(v)
	}
	return ok
}

// maxDigits keeps every integer read within int64 (and a 64-bit int).
const maxDigits = 18

// integer reads a JSON integer (no fraction, no exponent) of at most
// maxDigits digits; signed says whether a minus sign may start it
// (encoding/json refuses "-0" for an unsigned field).
func (s *jscan) integer(signed bool) (int64, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg && !signed {
		return 0, false
	}
	if neg {
		s.i++
	}
	start := s.i
	var v int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - start
	switch {
	case n == 0 || n > maxDigits, n > 1 && s.b[start] == '0':
		return 0, false
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func (s *jscan) int(dst *int) bool {
	v, ok := s.integer(true)
	if !ok || int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

func (s *jscan) uint64(dst *uint64) bool {
	v, ok := s.integer(false)
	if !ok {
		return false
	}
	*dst = uint64(v)
	return true
}

func (s *jscan) bool(dst *bool) bool {
	s.ws()
	switch {
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		*dst, s.i = true, s.i+4
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		*dst, s.i = false, s.i+5
	default:
		return false
	}
	return true
}

// object reads {"key": value, ...}, calling field for every key with
// the scanner at its value; field reads the value or reports false.
func (s *jscan) object(field func(key []byte) bool) bool {
	if !s.lit('{') {
		return false
	}
	if s.lit('}') {
		return true
	}
	for {
		k, ok := s.raw()
		if !ok || !s.lit(':') || !field(k) {
			return false
		}
		if !s.lit(',') {
			return s.lit('}')
		}
	}
}

func (s *jscan) relayAllocation(a *RelayAllocation) bool {
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "capability":
			return s.capability(&a.Capability)
		case "publication":
			return s.publication(&a.Publication)
		case "bootId":
			return s.str(&a.BootID)
		case "replayed":
			return s.bool(&a.Replayed)
		}
		return false
	})
	s.ws()
	return ok && s.i == len(s.b)
}

func (s *jscan) capability(c *Capability) bool {
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "host":
			return s.str(&c.Host)
		case "secret":
			return s.str(&c.Secret)
		case "port":
			return s.int(&c.Port)
		case "udpPort":
			return s.int(&c.UDPPort)
		case "udpPortV2":
			return s.int(&c.UDPPortV2)
		case "ssl":
			return s.bool(&c.SSL)
		}
		return false
	})
}

// publication reads a Publication without MovedFrom (a handed-over room's
// publication goes to encoding/json).
func (s *jscan) publication(p *Publication) bool {
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "name":
			return s.str(&p.Name)
		case "epoch":
			return s.str(&p.Epoch)
		case "revision":
			return s.uint64(&p.Revision)
		case "connections":
			return s.int(&p.Connections)
		case "clientSecret":
			return s.str(&p.ClientSecret)
		case "allocationId":
			return s.str(&p.AllocationID)
		case "vacant":
			return s.bool(&p.Vacant)
		}
		return false
	})
}

// WriteCapability is WriteJSON(w, status, c), the same bytes without
// reflection or an allocation.
func WriteCapability(w http.ResponseWriter, status int, c Capability) {
	bp := capBufs.Get().(*[]byte)
	b := AppendCapability((*bp)[:0], c)
	w.Header()["Content-Type"] = jsonType
	w.WriteHeader(status)
	_, _ = w.Write(b)
	*bp = b
	capBufs.Put(bp)
}

var capBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// AppendCapability appends c as json.NewEncoder writes it (encoding/json's
// field order and escaping, then a newline).
func AppendCapability(b []byte, c Capability) []byte {
	b = append(b, `{"host":`...)
	b = appendJSONString(b, c.Host)
	b = append(b, `,"secret":`...)
	b = appendJSONString(b, c.Secret)
	b = append(b, `,"port":`...)
	b = strconv.AppendInt(b, int64(c.Port), 10)
	b = append(b, `,"udpPort":`...)
	b = strconv.AppendInt(b, int64(c.UDPPort), 10)
	b = append(b, `,"udpPortV2":`...)
	b = strconv.AppendInt(b, int64(c.UDPPortV2), 10)
	b = append(b, `,"ssl":`...)
	b = strconv.AppendBool(b, c.SSL)
	return append(b, "}\n"...)
}

// appendJSONString appends v quoted as encoding/json does: as it is when
// it is printable ASCII that needs no escape (encoding/json also escapes
// <, > and & for HTML), else through json.Marshal.
func appendJSONString(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(v)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}
