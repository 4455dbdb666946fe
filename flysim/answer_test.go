package flysim

import (
	fly "github.com/superfly/fly-go"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// lockProbe is a ResponseWriter that records, at each write, whether
// Sim.mu was free.
type lockProbe struct {
	*httptest.ResponseRecorder
	s           *Sim
	lockedWrite bool
}

func (p *lockProbe) Write(b []byte) (int, error) {
	if p.s.mu.TryLock() {
		p.s.mu.Unlock()
	} else {
		p.lockedWrite = true
	}
	return p.ResponseRecorder.Write(b)
}

// A Machines API answer is written to the client only after its handler
// has released Sim.mu: the handlers that read a machine build their JSON
// under the lock, and a client that reads slowly must not hold it.
func TestAnswersAreWrittenAfterTheLockIsReleased(t *testing.T) {
	cfg := &Config{Token: DefaultToken, Images: map[string]*Image{"x": {Command: []string{"x"}}}, Apps: []*AppConfig{{Name: "web", InternalPort: 8080}}}
	s, err := New(cfg, Options{Executable: "/bin/true", LogDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a := s.apps["web"]
	m := &machine{app: a, id: "148e21dad76789", ip: "127.0.0.2", region: "ams", state: StateStarted, changed: make(chan struct{}), config: &fly.MachineConfig{Image: "x"}}
	a.machines[m.id], a.order = m, append(a.order, m)
	h := (&apiServer{s: s}).routes()
	for _, path := range []string{"/v1/apps/web/machines/" + m.id, "/v1/apps/web/machines", "/v1/apps/web"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+DefaultToken)
		p := &lockProbe{ResponseRecorder: httptest.NewRecorder(), s: s}
		h.ServeHTTP(p, req)
		if p.Code != http.StatusOK || p.Body.Len() == 0 {
			t.Fatalf("GET %s: %d %s", path, p.Code, p.Body)
		}
		if p.lockedWrite {
			t.Errorf("GET %s: the answer was written while Sim.mu was held", path)
		}
	}
}
