package wire

import (
	"net/http"
	"testing"
	"time"
)

// Rule: zero or negative HTTPLimits fields take the documented defaults
// (10 s, 30 s, 30 s, 60 s); set ones are kept; Apply puts them and
// MaxHeaderBytes on the server.
func TestHTTPLimitsDefaultsAndApply(t *testing.T) {
	got := HTTPLimits{Read: -time.Second}.WithDefaults()
	want := HTTPLimits{Header: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second}
	if got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	set := HTTPLimits{Header: time.Second, Read: 2 * time.Second, Write: 3 * time.Second, Idle: 4 * time.Second}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("set limits became %+v", got)
	}
	var srv http.Server
	HTTPLimits{Write: 3 * time.Second}.Apply(&srv)
	if srv.ReadHeaderTimeout != 10*time.Second || srv.ReadTimeout != 30*time.Second || srv.WriteTimeout != 3*time.Second ||
		srv.IdleTimeout != 60*time.Second || srv.MaxHeaderBytes != MaxHeaderBytes {
		t.Fatalf("applied: header %v read %v write %v idle %v max header bytes %d",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}
