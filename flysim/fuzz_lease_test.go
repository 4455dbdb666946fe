package flysim

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
)

// FuzzLeaseTTL: the ?ttl= of a lease request (seconds, as flaps sends
// them). A lease the API grants expires in the future, after the ttl asked
// for (at most MaxLeaseTTL), never already expired or at another time
// because the seconds overflowed.
func FuzzLeaseTTL(f *testing.F) {
	for _, s := range []string{"30", "", "1", "3600", "3601", "0", "-1", "9223372037", "1e3", "30s"} {
		f.Add(s)
	}
	cfg := &Config{Token: DefaultToken, Images: map[string]*Image{"x": {Command: []string{"x"}}}, Apps: []*AppConfig{{Name: "web", InternalPort: 8080}}}
	s, err := New(cfg, Options{Executable: "/bin/true", LogDir: f.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	a := s.apps["web"]
	m := &machine{app: a, id: "148e21dad76789", ip: "127.0.0.2", region: "ams", state: StateStarted, changed: make(chan struct{})}
	a.machines[m.id], a.order = m, append(a.order, m)
	h := (&apiServer{s: s}).routes()
	f.Fuzz(func(t *testing.T, ttl string) {
		s.mu.Lock()
		m.lease = nil
		s.mu.Unlock()
		req := httptest.NewRequest(http.MethodPost, "/v1/apps/web/machines/"+m.id+"/lease?ttl="+url.QueryEscape(ttl), nil)
		req.Header.Set("Authorization", "Bearer "+DefaultToken)
		w := httptest.NewRecorder()
		before := time.Now()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			return
		}
		var l fly.MachineLease
		if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || l.Data == nil {
			t.Fatalf("ttl %q: %s", ttl, w.Body)
		}
		want := DefaultLeaseTTL
		if n, err := strconv.Atoi(ttl); err == nil && ttl != "" {
			want = min(time.Duration(min(n, 1<<30))*time.Second, MaxLeaseTTL)
		}
		exp := time.Unix(l.Data.ExpiresAt, 0)
		if lo, hi := before.Add(want).Add(-time.Second), time.Now().Add(want).Add(time.Second); exp.Before(lo) || exp.After(hi) {
			t.Fatalf("ttl %q: lease expires at %v, want %v from now", ttl, exp, want)
		}
	})
}
