//go:build unix

package flysim

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// TestLeaseExpiry: a lease ends at its TTL (driven by a fake clock); until
// then every change needs its nonce, and a release needs it too.
func TestLeaseExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.Apps[0].Machines = cfg.Apps[0].Machines[:1]
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(cfg, Options{LogDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := machineIDs(s, "web")[0]
	path := "/v1/apps/web/machines/" + id
	status, body := apiDo(t, s, "POST", path+"/lease?ttl=10", testToken, nil)
	data, _ := body["data"].(map[string]any)
	nonce, _ := data["nonce"].(string)
	if status != http.StatusOK || body["status"] != "success" || nonce == "" || data["expires_at"] != float64(fake.Now().Unix()+10) {
		t.Fatalf("acquire: %d %v", status, body)
	}
	for _, op := range []string{"/stop", "/start", "/restart"} {
		if status, _ := apiDo(t, s, "POST", path+op, testToken, nil); status != http.StatusConflict {
			t.Errorf("%s without nonce while leased: %d, want 409", op, status)
		}
	}
	if status, _ := apiDo(t, s, "DELETE", path, testToken, map[string]string{"fly-machine-lease-nonce": "wrong"}); status != http.StatusConflict {
		t.Errorf("destroy with a wrong nonce: %d, want 409", status)
	}
	if status, _ := apiDo(t, s, "DELETE", path+"/lease", testToken, nil); status != http.StatusConflict {
		t.Errorf("release without nonce: %d, want 409", status)
	}
	fake.Advance(9 * time.Second)
	if status, _ := apiDo(t, s, "POST", path+"/lease", testToken, nil); status != http.StatusConflict {
		t.Errorf("acquire before expiry: %d, want 409", status)
	}
	fake.Advance(2 * time.Second)
	if status, _ := apiDo(t, s, "GET", path+"/lease", testToken, nil); status != http.StatusNotFound {
		t.Errorf("find after expiry: %d, want 404", status)
	}
	status, body = apiDo(t, s, "POST", path+"/lease", testToken, nil)
	data, _ = body["data"].(map[string]any)
	if status != http.StatusOK || data["nonce"] == nonce {
		t.Fatalf("acquire after expiry: %d %v", status, body)
	}
}
