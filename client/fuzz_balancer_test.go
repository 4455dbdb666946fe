package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/purrfly/purrfly/wire"
)

// FuzzBalancerAnswers feeds arbitrary answers (status and body) to the
// client's balancer calls, through the real client code with an
// in-process transport: servers, allocate, join, list and ping. A non-2xx
// answer is an error carrying its status; a body over MaxResponseSize is
// ErrResponseTooLarge; an accepted capability passes PurrNet's checks and
// gives a relay URL (ws or wss as the capability says) on its own host and
// port, with no path or query.
func FuzzBalancerAnswers(f *testing.F) {
	capa, _ := json.Marshal(wire.Capability{Host: "relay.example", Secret: "s", Port: 443, UDPPort: 7777, UDPPortV2: 7778, SSL: true})
	f.Add(uint8(1), 200, capa)
	f.Add(uint8(2), 200, capa)
	f.Add(uint8(2), 200, []byte(`{"host":"[::1]","secret":"s","port":6942,"udpPortV2":1,"ssl":false}`))
	f.Add(uint8(2), 200, []byte(`{"host":"a b","secret":"s","port":6942,"udpPortV2":1}`))
	f.Add(uint8(2), 200, []byte(`{"host":"h:1","secret":"s","port":80,"udpPortV2":1}`))
	f.Add(uint8(1), 404, []byte(`{"code":"room_not_found","error":"no such room","retryable":false}`))
	f.Add(uint8(0), 200, []byte(`{"servers":[{"apiEndpoint":"http://r","host":"r","restPort":8080,"udpPort":7777,"udpPortV2":7778,"webSocketsPort":6942,"region":"eu"}]}`))
	f.Add(uint8(3), 200, []byte(`{"results":[{"name":"r","region":"eu","connectedPlayers":2}],"total":1}`))
	f.Add(uint8(4), 200, []byte(`OK`))
	f.Add(uint8(4), 200, []byte(`{"role":"relay","bootId":"b"}`))
	f.Add(uint8(4|0x40), 200, []byte(`{}`))
	f.Add(uint8(2), 502, []byte(`<html>`))
	var status int
	var body []byte
	b := &Balancer{BaseURL: "http://balancer.invalid", HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})}}
	f.Fuzz(func(t *testing.T, kind uint8, st int, in []byte) {
		if st < 100 || st > 999 || st == http.StatusSwitchingProtocols {
			return // net/http never hands a client another status
		}
		status, body = st, in
		if kind&0x40 != 0 {
			body = append(bytes.Clone(in), bytes.Repeat([]byte(" "), MaxResponseSize+1-len(in)%MaxResponseSize)...)
		}
		ctx := context.Background()
		var c wire.Capability
		var err error
		switch kind % 5 {
		case 0:
			_, err = b.Servers(ctx)
		case 1:
			c, err = b.Allocate(ctx, "eu", "room", "alloc-1")
		case 2:
			c, err = b.Join(ctx, "room")
		case 3:
			_, err = b.List(ctx, 0)
		default:
			_, _, err = b.Ping(ctx, "http://relay.invalid")
		}
		var we *wire.Error
		switch {
		case len(body) > MaxResponseSize:
			if !errors.Is(err, ErrResponseTooLarge) {
				t.Fatalf("%d-byte answer: %v", len(body), err)
			}
			return
		case st < 200 || st > 299:
			if !errors.As(err, &we) || we.Status != st || we.Code == "" {
				t.Fatalf("status %d %q: %v", st, in, err)
			}
			return
		}
		if err != nil || kind%5 != 1 && kind%5 != 2 {
			return
		}
		if ValidateCapability(c) != nil {
			t.Fatalf("accepted %+v", c)
		}
		raw, err := RelayURL(c)
		if err != nil {
			t.Fatalf("accepted %+v without a relay URL: %v", c, err)
		}
		u, err := url.Parse(raw)
		scheme, def := "ws", 80
		if c.SSL {
			scheme, def = "wss", 443
		}
		port := u.Port()
		if port == "" {
			port = strconv.Itoa(def)
		}
		host := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(c.Host), "["), "]")
		if err != nil || u.Scheme != scheme || u.Hostname() != host || port != strconv.Itoa(c.Port) || u.Path != "" || u.RawQuery != "" || u.User != nil {
			t.Fatalf("capability %+v gave relay URL %q (%v)", c, raw, err)
		}
	})
}

// roundTrip is an http.RoundTripper from a function: answers without a
// network.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
