package flysim

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	fly "github.com/superfly/fly-go"
)

// Limits of the Machines API.
const (
	maxAPIBody       = 1 << 20
	maxHeaderBytes   = 16 << 10
	maxWaitTimeout   = 300 * time.Second
	defaultWaitTimeo = 60 * time.Second
)

// apiServer is the Machines API: the subset of https://api.machines.dev that
// fly-go's flaps client calls, with Fly's JSON shapes.
type apiServer struct {
	s     *Sim
	srv   *http.Server
	ln    net.Listener
	url   string
	limit *rateLimits // nil: no rate limits (Platform.RateLimit)
}

func startAPI(s *Sim, addr string) (*apiServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to bind the Machines API on %s: %w", addr, err)
	}
	a := &apiServer{s: s, ln: ln, url: "http://" + ln.Addr().String(), limit: newRateLimits(s)}
	a.srv = &http.Server{
		Handler:           a.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("machines API stopped", "err", err)
		}
	}()
	return a, nil
}

func (a *apiServer) close(ctx context.Context) error {
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
		return fmt.Errorf("failed to shut the Machines API down: %w", err)
	}
	return nil
}

// apiError is an error answer in Fly's shape: {"error": "..."} (the field
// flaps turns into its error text), with an HTTP status.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// writeFlyError writes err as Fly does. Errors that are not *apiError become a
// 500 whose text is not shown.
func writeFlyError(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		e = &apiError{status: http.StatusInternalServerError, msg: "internal error"}
	}
	writeJSON(w, e.status, map[string]string{"error": e.msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (a *apiServer) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern, action string, f handlerFunc) {
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			defer func() { a.s.met.apiRequests.WithLabelValues(action, strconv.Itoa(sw.code)).Inc() }()
			if err := a.permitted(r); err != nil {
				writeFlyError(sw, err)
				return
			}
			if !a.limit.allow(sw, r, action) {
				return
			}
			a.s.serveWithFaults(sw, r, action, func(w http.ResponseWriter, r *http.Request) {
				// The handler builds its answer, under Sim.mu if it takes
				// it; the answer goes out once the handler has returned
				// and its deferred unlocks have run, so no client's slow
				// read holds the lock.
				ans := newAnswer()
				if err := f(ans, r); err != nil {
					ans = newAnswer()
					writeFlyError(ans, err)
				}
				ans.send(w)
			})
		}))
	}
	h("GET /v1/apps", "list_apps", a.listApps)
	h("POST /v1/apps", "create_app", a.createApp)
	h("GET /v1/apps/{app}", "get_app", a.getApp)
	h("GET /v1/apps/{app}/ip_assignments", "list_ips", a.listIPs)
	h("POST /v1/apps/{app}/ip_assignments", "assign_ip", a.assignIP)
	h("DELETE /v1/apps/{app}/ip_assignments/{ip}", "delete_ip", a.deleteIP)
	h("GET /v1/apps/{app}/secrets", "list_secrets", a.listSecrets)
	h("POST /v1/apps/{app}/secrets", "update_secrets", a.updateSecrets)
	h("GET /v1/apps/{app}/secrets/{name}", "get_secret", a.getSecret)
	h("POST /v1/apps/{app}/secrets/{name}", "set_secret", a.setSecret)
	h("DELETE /v1/apps/{app}/secrets/{name}", "delete_secret", a.deleteSecret)
	h("GET /v1/apps/{app}/machines", "list", a.listMachines)
	h("POST /v1/apps/{app}/machines", "create", a.createMachine)
	h("GET /v1/apps/{app}/machines/{id}", "get", a.getMachine)
	h("POST /v1/apps/{app}/machines/{id}", "update", a.updateMachine)
	h("DELETE /v1/apps/{app}/machines/{id}", "destroy", a.destroyMachine)
	h("POST /v1/apps/{app}/machines/{id}/start", "start", a.startMachine)
	h("POST /v1/apps/{app}/machines/{id}/stop", "stop", a.stopMachine)
	h("POST /v1/apps/{app}/machines/{id}/restart", "restart", a.restartMachine)
	h("POST /v1/apps/{app}/machines/{id}/signal", "signal", a.signalMachine)
	h("POST /v1/apps/{app}/machines/{id}/cordon", "cordon", a.cordon(true))
	h("POST /v1/apps/{app}/machines/{id}/uncordon", "uncordon", a.cordon(false))
	h("GET /v1/apps/{app}/machines/{id}/wait", "wait", a.waitMachine)
	h("GET /v1/apps/{app}/machines/{id}/events", "events", a.machineEvents)
	h("GET /v1/apps/{app}/machines/{id}/metadata", "metadata_get", a.getMetadata)
	h("POST /v1/apps/{app}/machines/{id}/metadata/{key}", "metadata_set", a.setMetadata)
	h("DELETE /v1/apps/{app}/machines/{id}/metadata/{key}", "metadata_delete", a.deleteMetadata)
	h("GET /v1/apps/{app}/machines/{id}/lease", "find_lease", a.findLease)
	h("POST /v1/apps/{app}/machines/{id}/lease", "acquire_lease", a.acquireLease)
	h("DELETE /v1/apps/{app}/machines/{id}/lease", "release_lease", a.releaseLease)
	mux.Handle("POST /flysim/v1/faults", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if scopeOf(r) != "" {
			writeFlyError(w, errf(http.StatusForbidden, "unauthorized"))
			return
		}
		var raw json.RawMessage
		if err := decodeBody(r, &raw); err != nil {
			writeFlyError(w, err)
			return
		}
		var kind struct {
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(raw, &kind)
		var err error
		if kind.Kind == NetHostDown || kind.Kind == NetHostUp { // host.go
			var nf NetFault
			if err = json.Unmarshal(raw, &nf); err == nil {
				var host string
				var ids []string
				if host, ids, err = a.s.HostFault(nf); err == nil {
					writeJSON(w, http.StatusOK, map[string]any{"ok": true, "host": host, "machines": ids})
					return
				}
			}
			writeFlyError(w, errf(http.StatusBadRequest, "%v", err))
			return
		}
		if kind.Kind != "" { // a network fault (netfault.go)
			var nf NetFault
			if err = json.Unmarshal(raw, &nf); err == nil {
				err = a.s.InjectNetFault(nf)
			}
		} else {
			var f Fault
			if err = json.Unmarshal(raw, &f); err == nil {
				err = a.s.InjectFault(f)
			}
		}
		if err != nil {
			writeFlyError(w, errf(http.StatusBadRequest, "%v", err))
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}))
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeFlyError(w, errf(http.StatusNotFound, "not found"))
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("fly-request-id", newULID(time.Now()))
		scope, ok := a.authorized(r)
		if !ok {
			writeFlyError(w, errf(http.StatusUnauthorized, "unauthorized"))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), scopeKey{}, scope))
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxAPIBody)
		}
		mux.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status of an answer (for the metrics); Unwrap
// keeps Hijack and Flush reachable through http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authorized accepts "Bearer <token>" and "FlyV1 <token>" (flaps sends either,
// depending on the token's kind): the organisation's token (scope "") or,
// with Platform.DeployTokens, an app's deploy token (scope: that app). The
// comparisons hash both sides first so neither content nor length leaks
// through timing.
func (a *apiServer) authorized(r *http.Request) (scope string, ok bool) {
	h := r.Header.Get("Authorization")
	tok := ""
	for _, scheme := range []string{"Bearer ", "FlyV1 "} {
		if len(h) > len(scheme) && strings.EqualFold(h[:len(scheme)], scheme) {
			tok = strings.TrimSpace(h[len(scheme):])
		}
	}
	if tok == "" {
		return "", false
	}
	x := sha256.Sum256([]byte(tok))
	same := func(want string) bool {
		y := sha256.Sum256([]byte(want))
		return subtle.ConstantTimeCompare(x[:], y[:]) == 1
	}
	if same(a.s.cfg.Token) {
		return "", true
	}
	if a.s.cfg.Platform.DeployTokens {
		for _, ac := range a.s.cfg.Apps {
			if same(a.s.cfg.deployToken(ac.Name)) {
				return ac.Name, true
			}
		}
	}
	return "", false
}

// scopeKey carries a request's token scope (authorized) in its context.
type scopeKey struct{}

// scopeOf is the app r's token is scoped to ("" the organisation).
func scopeOf(r *http.Request) string {
	s, _ := r.Context().Value(scopeKey{}).(string)
	return s
}

// permitted refuses, as Fly does with 403, what r's token may not reach:
// an app-scoped token anything but its app's routes, and every token the
// routes of an app another organisation holds (Platform.TakenAppNames).
func (a *apiServer) permitted(r *http.Request) error {
	app := r.PathValue("app")
	if scope := scopeOf(r); scope != "" && app != scope {
		return errf(http.StatusForbidden, "unauthorized")
	}
	if app != "" && a.s.cfg.Platform.taken(app) {
		return errf(http.StatusForbidden, "unauthorized")
	}
	return nil
}

// appOf finds the app named in the path (a reserved app only once created).
func (a *apiServer) appOf(r *http.Request) (*app, error) {
	name := r.PathValue("app")
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	ap := a.s.existingAppLocked(name)
	if ap == nil {
		return nil, errf(http.StatusNotFound, "app not found")
	}
	return ap, nil
}

// machineOf finds the machine named in the path (destroyed ones included:
// Get and Wait still answer for them).
func (a *apiServer) machineOf(r *http.Request) (*machine, error) {
	ap, err := a.appOf(r)
	if err != nil {
		return nil, err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	m := ap.machines[r.PathValue("id")]
	if m == nil || !m.knownLocked(&a.s.cfg.Platform, a.s.clk.Now()) {
		return nil, errf(http.StatusNotFound, "machine not found")
	}
	return m, nil
}

// machineOnUpHost is machineOf for the calls that change a machine: one
// whose host failed cannot be reached (503) until the host returns.
func (a *apiServer) machineOnUpHost(r *http.Request) (*machine, error) {
	m, err := a.machineOf(r)
	if err != nil {
		return nil, err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if a.s.hostDownLocked(m) {
		return nil, errf(http.StatusServiceUnavailable, "machine %s is on host %s, which is unreachable", m.id, m.host)
	}
	return m, nil
}

func (a *apiServer) viewLocked(m *machine) *fly.Machine {
	img, _ := a.s.cfg.lookupImage(m.config.Image)
	return m.viewLocked(img, &a.s.cfg.Platform)
}

// listMachines lists the app's machines, destroyed ones left out unless
// ?include_deleted=true. A state filter arrives as ?state=started or, as
// flaps v0.8.0 writes it, ?started.
func (a *apiServer) listMachines(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	want := map[string]bool{}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			want[st] = true
		}
	}
	for k, v := range q {
		if len(v) == 1 && v[0] == "" && k != "state" {
			want[k] = true
		}
	}
	deleted := q.Get("include_deleted") == "true"
	delete(want, "include_deleted")
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	now := a.s.clk.Now()
	out := []*fly.Machine{}
	for _, m := range ap.order {
		if m.state == StateDestroyed && !want[StateDestroyed] && !deleted {
			continue
		}
		if !m.listedLocked(&a.s.cfg.Platform, now) {
			continue // not in the lists yet (eventual consistency)
		}
		if len(want) > 0 && !want[m.state] {
			continue
		}
		out = append(out, a.viewLocked(m))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *apiServer) getMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	writeJSON(w, http.StatusOK, a.viewLocked(m))
	return nil
}

func (a *apiServer) machineEvents(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	writeJSON(w, http.StatusOK, a.viewLocked(m).Events)
	return nil
}

// waitMachine answers 200 {"ok":true} once the machine is in one of the
// states (repeated ?state= or comma-separated; default started), at the
// given version or instance_id when one is given, else 408 after timeout
// seconds (default 60).
func (a *apiServer) waitMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var states []string
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if st = strings.TrimSpace(st); st != "" {
				states = append(states, st)
			}
		}
	}
	if len(states) == 0 {
		states = []string{StateStarted}
	}
	timeout := defaultWaitTimeo
	if v := q.Get("timeout"); v != "" {
		d, err := parseSeconds(v)
		if err != nil {
			return errf(http.StatusBadRequest, "invalid timeout %q", v)
		}
		timeout = min(max(d, time.Second), maxWaitTimeout)
	}
	version := q.Get("version")
	if version == "" {
		version = q.Get("instance_id")
	}
	ok, err := a.s.waitState(r.Context(), m, states, version, timeout)
	switch {
	case errors.Is(err, errDestroyed):
		return errf(http.StatusNotFound, "machine %s was destroyed while waiting for %s", m.id, strings.Join(states, ","))
	case err != nil:
		return errf(http.StatusServiceUnavailable, "wait aborted: %v", err)
	case !ok:
		return errf(http.StatusRequestTimeout, "deadline_exceeded: machine %s did not reach %s within %s", m.id, strings.Join(states, ","), timeout)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// parseSeconds reads "60" (seconds, as flaps sends) or "60s".
func parseSeconds(v string) (time.Duration, error) {
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err == nil && fmt.Sprint(n) == v {
		// Past time.Duration's range n*time.Second wrapped around (the
		// 9223372037 seconds of FuzzParseSeconds were -2562047h).
		if int64(n) > math.MaxInt64/int64(time.Second) || int64(n) < math.MinInt64/int64(time.Second) {
			return 0, fmt.Errorf("%d seconds is out of range", n)
		}
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}
