package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCallAnswersAndFates(t *testing.T) {
	var got struct{ secret, version, ctype, body, extra string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.secret, got.version, got.ctype, got.body, got.extra = r.Header.Get(HeaderInternalSecret), r.Header.Get(HeaderInternalVersion),
			r.Header.Get("Content-Type"), string(b), r.Header.Get("X-Extra")
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, `{"a":1}`)
		case "/created":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"a":2}`)
		case "/refused":
			WriteError(w, ErrRoomNotFound)
		case "/big":
			io.WriteString(w, strings.Repeat("x", 100))
		case "/hangup":
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := Call{Method: http.MethodPost, URL: srv.URL + "/ok", Secret: "s3cret-value", Body: map[string]int{"n": 1},
		Header: func(h http.Header) { h.Set("X-Extra", "yes") }}
	var out struct{ A int }
	if err := c.DoJSON(ctx, srv.Client(), &out); err != nil || out.A != 1 {
		t.Fatalf("ok: %+v %v", out, err)
	}
	if got.secret != "s3cret-value" || got.version == "" || got.ctype != "application/json" || got.body != `{"n":1}` || got.extra != "yes" {
		t.Errorf("request as sent: %+v", got)
	}
	c.URL = srv.URL + "/created"
	if _, err := c.Do(ctx, srv.Client()); err != nil {
		t.Errorf("a 201 with OK unset: %v", err)
	}
	c.OK = http.StatusOK
	if _, err := c.Do(ctx, srv.Client()); err == nil {
		t.Error("a 201 passed OK = 200")
	}
	c.OK = 0
	c.URL = srv.URL + "/refused"
	if _, err := c.Do(ctx, srv.Client()); !errors.Is(err, ErrRoomNotFound) {
		t.Errorf("refused: %v, want the other side's room_not_found", err)
	}
	c.URL, c.MaxAnswer = srv.URL+"/big", 10
	if _, err := c.Do(ctx, srv.Client()); !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("answer over MaxAnswer: %v", err)
	}
	c.URL, c.MaxAnswer = srv.URL+"/hangup", 0
	if _, err := c.Do(ctx, srv.Client()); !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotDelivered) {
		t.Errorf("hung up after the request: %v, want outcome unknown", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	c.URL = "http://" + dead + "/ok"
	_, err := c.Do(ctx, srv.Client())
	if !errors.Is(err, ErrNotDelivered) || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("nobody listening: %v, want not delivered", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("an error carries the secret: %v", err)
	}
	if _, err := (Call{Method: "BAD METHOD", URL: srv.URL}).Do(ctx, srv.Client()); !errors.Is(err, ErrNotDelivered) {
		t.Errorf("an unbuildable request: %v", err)
	}
	if err := (Call{Method: http.MethodGet, URL: srv.URL + "/big"}).DoJSON(ctx, srv.Client(), &out); err == nil || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("an answer that is not JSON: %v", err)
	}
}
