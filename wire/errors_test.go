package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriteErrorShape(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, fmt.Errorf("failed to allocate: %w", ErrRoomTaken))
	if rec.Code != http.StatusConflict {
		t.Fatalf("status = %d", rec.Code)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body["code"] != "room_name_taken" || body["retryable"] != false || body["error"] == "" || len(body) != 3 {
		t.Fatalf("body = %v", body)
	}
}

func TestWriteErrorHidesInternalDetail(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, errors.New("dial tcp 10.0.0.1: secret=hunter2"))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "hunter2") || strings.Contains(rec.Body.String(), "10.0.0.1") {
		t.Fatalf("leaked: %d %s", rec.Code, rec.Body)
	}
}

func TestDecodeError(t *testing.T) {
	e := DecodeError(404, []byte(`{"code":"room_not_found","error":"no such room","retryable":false}`))
	if !errors.Is(e, ErrRoomNotFound) || e.Status != 404 {
		t.Fatalf("decoded = %+v", e)
	}
	e = DecodeError(502, []byte("<html>"))
	if e.Code != "http_502" || !e.Retryable {
		t.Fatalf("non-json = %+v", e)
	}
}

func TestCommonHeadersAndPreflight(t *testing.T) {
	h := Common(Handler(func(w http.ResponseWriter, r *http.Request) error {
		return ErrRoomNotFound
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/join", nil))
	if rec.Header().Get("Cache-Control") != "no-store, private" || rec.Header().Get("Pragma") != "no-cache" ||
		rec.Header().Get("Access-Control-Allow-Origin") != "*" || rec.Code != 404 {
		t.Fatalf("headers = %v code %d", rec.Header(), rec.Code)
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodOptions, "/allocate_ws", nil)
	req.Header.Set("Access-Control-Request-Headers", "region,name,allocation_id")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent || !strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "allocation_id") ||
		!strings.Contains(rec.Header().Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight = %d %v", rec.Code, rec.Header())
	}
}

func TestCapabilityValidate(t *testing.T) {
	ok := Capability{Host: "h", Secret: "s", Port: 1, UDPPortV2: 65535}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Capability{
		{Secret: "s", Port: 1, UDPPortV2: 1},
		{Host: "h", Port: 1, UDPPortV2: 1},
		{Host: "h", Secret: "s", Port: 0, UDPPortV2: 1},
		{Host: "h", Secret: "s", Port: 1, UDPPortV2: 70000},
	} {
		if err := c.Validate(); !errors.Is(err, ErrRelayBadAnswer) {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
	}
}

func TestSetInternalPassesCheckInternal(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, PathRegister, nil)
	SetInternal(req.Header, "s3cret")
	if err := CheckInternal(req, "s3cret"); err != nil {
		t.Fatalf("CheckInternal after SetInternal: %v", err)
	}
	if err := CheckInternal(req, "other"); err == nil {
		t.Fatal("CheckInternal accepted another secret")
	}
	if got := req.Header.Get(HeaderInternalVersion); got != "2" {
		t.Fatalf("version header %q, want 2", got)
	}
}
