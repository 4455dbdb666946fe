package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/purrfly/purrfly/flysim"
	"github.com/purrfly/purrfly/wire"
)

// fleet is what the soak knows of the organisation it storms: the sim's
// address book (flysim.State) and, from its config, which app is the
// balancer, which are relays, the shared secret and each single-machine
// relay's fault links. Static after newFleet.
type fleet struct {
	st       flysim.State
	secret   string
	balancer string               // app name
	relays   []string             // relay app names, config order
	ports    map[string]int       // app -> internal_port
	regions  map[string]string    // app -> primary region
	links    map[string][2]string // relay app -> {uplink, downlink} names ("" when none)
	multi    string               // a relay app with more than one machine ("" when none)
	// balancerStandby: the balancer app has a standby machine (a config
	// machine with standby_for), so a host_down fault has something to fail over to.
	balancerStandby bool
	hc              *http.Client // Machines API and private-address calls
	health          bounds
	lists           *listCache // internally locked
}

// listEvery is how often the soak lists one app's machines at most: Fly
// allows about one list a second per app, and the views, the scheduler
// and the health waits all look, so they share one listing a second.
const listEvery = time.Second

// listCache holds each app's latest machine list (at most listEvery old).
// A caller that finds it stale lists again while holding the app's lock,
// so concurrent callers wait for that one list instead of sending theirs.
type listCache struct {
	mu   sync.Mutex // guards apps
	apps map[string]*appList
}

type appList struct {
	mu sync.Mutex // held across the list call, guards the rest
	at time.Time
	ms []machine
}

func (c *listCache) of(app string) *appList {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.apps[app]
	if l == nil {
		l = &appList{}
		c.apps[app] = l
	}
	return l
}

// bounds are the fleet's configured intervals, from which every time bound
// of an invariant is derived (report.go explains each).
type bounds struct {
	HealthInterval time.Duration `json:"health_interval"`
	HealthTimeout  time.Duration `json:"health_timeout"`
	HealthFailures int           `json:"health_failures"`
	Heartbeat      time.Duration `json:"heartbeat"`
	Drain          time.Duration `json:"drain"`
}

// Values the balancer and relay take when the config leaves them out.
const (
	defaultHealthInterval = 10 * time.Second
	balancerHealthTimeout = 3 * time.Second // balancer.DefaultHealthTimeout (not configurable by env)
	balancerHealthFails   = 3               // balancer.DefaultHealthFailures
	defaultHeartbeat      = 30 * time.Second
	defaultDrain          = 25 * time.Second
)

var linkRef = regexp.MustCompile(`^\{link:([a-z0-9-]+)\}$`)

func newFleet(cfg *flysim.Config, st flysim.State) (*fleet, error) {
	f := &fleet{st: st, ports: map[string]int{}, regions: map[string]string{}, links: map[string][2]string{},
		lists: &listCache{apps: map[string]*appList{}},
		hc:    &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second}},
		health: bounds{HealthInterval: defaultHealthInterval, HealthTimeout: balancerHealthTimeout,
			HealthFailures: balancerHealthFails, Heartbeat: defaultHeartbeat, Drain: defaultDrain}}
	var heartbeat time.Duration // the slowest relay's
	for _, a := range cfg.Apps {
		if len(a.Cmd) == 0 {
			continue
		}
		f.ports[a.Name] = a.InternalPort
		f.regions[a.Name] = a.PrimaryRegion
		// SECRET is an [apps.secrets] entry (fly secrets set), or in the
		// env of an older config.
		if s := cmp.Or(a.Secrets["SECRET"], a.Env["SECRET"]); s != "" {
			f.secret = s
		}
		switch a.Cmd[0] {
		case "balancer":
			f.balancer = a.Name
			f.balancerStandby = slices.ContainsFunc(a.Machines, func(m *flysim.MachineSpec) bool { return m != nil && m.StandbyFor != "" })
			if d, ok := envSeconds(a.Env, "HEALTH_INTERVAL_SECONDS"); ok {
				f.health.HealthInterval = d
			}
		case "relay":
			f.relays = append(f.relays, a.Name)
			hb := defaultHeartbeat
			if d, ok := envSeconds(a.Env, "HEARTBEAT_SECONDS"); ok {
				hb = d
			}
			heartbeat = max(heartbeat, hb)
			if d, ok := envSeconds(a.Env, "DRAIN_TIMEOUT_SECONDS"); ok {
				f.health.Drain = d
			}
			var up, down string
			if m := linkRef.FindStringSubmatch(a.Env["BALANCER_URL"]); m != nil {
				up = m[1]
			}
			if m := linkRef.FindStringSubmatch(a.Env["MACHINE_ENDPOINT"]); m != nil {
				down = m[1]
			}
			if up != "" || down != "" {
				f.links[a.Name] = [2]string{up, down}
			}
			if len(a.Machines) > 1 && f.multi == "" {
				f.multi = a.Name
			}
		}
	}
	f.health.Heartbeat = heartbeat
	if f.balancer == "" || len(f.relays) == 0 {
		return nil, fmt.Errorf("the config needs a balancer app and relay apps (cmd = [\"balancer\"], [\"relay\"])")
	}
	if f.secret == "" {
		f.secret = "PURRNET"
	}
	if st.Apps[f.balancer].URL == "" {
		return nil, fmt.Errorf("the sim state has no URL for %s", f.balancer)
	}
	return f, nil
}

// envSeconds reads an integer-seconds setting (HEARTBEAT_SECONDS = "2").
func envSeconds(env map[string]string, key string) (time.Duration, bool) {
	n, err := strconv.Atoi(env[key])
	if err != nil || n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// machine is one machine as the Machines API lists it.
type machine struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	PrivateIP string `json:"private_ip"`
	Config    struct {
		Standbys []string `json:"standbys"`
	} `json:"config"`
	app string
}

// base is the machine's own HTTP address (its private network side).
func (f *fleet) base(m machine) string {
	return "http://" + net.JoinHostPort(m.PrivateIP, strconv.Itoa(f.ports[m.app]))
}

// maxRateLimited bounds how often one Machines API call is sent again
// after a 429 (Fly rate-limits each action per machine).
const maxRateLimited = 10

// api calls the Machines API (or the sim's fault route) and decodes the
// JSON answer into out (nil: ignored). A rate-limited call (429) is sent
// again after its Retry-After.
func (f *fleet) api(ctx context.Context, method, path string, body, out any) error {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		payload = b
	}
	var resp *http.Response
	for try := 0; ; try++ {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, f.st.MachinesAPI+path, rd)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+f.st.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err = f.hc.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		if resp.StatusCode != http.StatusTooManyRequests || try >= maxRateLimited {
			break
		}
		resp.Body.Close()
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		case <-time.After(time.Duration(min(max(wait, 1), 30)) * time.Second):
		}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// machines lists an app's machines (every state but destroyed), as the
// Machines API listed them at most listEvery ago.
func (f *fleet) machines(ctx context.Context, app string) ([]machine, error) {
	l := f.lists.of(app)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() && time.Since(l.at) < listEvery {
		return slices.Clone(l.ms), nil
	}
	var ms []machine
	if err := f.api(ctx, http.MethodGet, "/v1/apps/"+url.PathEscape(app)+"/machines", nil, &ms); err != nil {
		return nil, err
	}
	for i := range ms {
		ms[i].app = app
	}
	l.at, l.ms = time.Now(), ms
	return slices.Clone(ms), nil
}

// started lists the started machines of apps.
func (f *fleet) started(ctx context.Context, apps ...string) ([]machine, error) {
	var out []machine
	for _, a := range apps {
		ms, err := f.machines(ctx, a)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if m.State == flysim.StateStarted {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

func (f *fleet) machinePath(app, id, op string) string {
	return "/v1/apps/" + url.PathEscape(app) + "/machines/" + url.PathEscape(id) + op
}

func (f *fleet) kill(ctx context.Context, m machine) error {
	return f.api(ctx, http.MethodPost, f.machinePath(m.app, m.ID, "/signal"), map[string]string{"signal": "SIGKILL"}, nil)
}

func (f *fleet) stop(ctx context.Context, m machine) error {
	return f.api(ctx, http.MethodPost, f.machinePath(m.app, m.ID, "/stop"), map[string]any{}, nil)
}

func (f *fleet) start(ctx context.Context, m machine) error {
	return f.api(ctx, http.MethodPost, f.machinePath(m.app, m.ID, "/start"), nil, nil)
}

// wait blocks until the machine is in state (bounded by timeout).
func (f *fleet) wait(ctx context.Context, m machine, state string, timeout time.Duration) error {
	q := "/wait?state=" + state + "&timeout=" + strconv.Itoa(max(1, int(timeout/time.Second)))
	return f.api(ctx, http.MethodGet, f.machinePath(m.app, m.ID, q), nil, nil)
}

// netFault arms a flysim network fault through the control route.
func (f *fleet) netFault(ctx context.Context, nf flysim.NetFault) error {
	return f.api(ctx, http.MethodPost, "/flysim/v1/faults", nf, nil)
}

// private GETs path on a machine's own address with the internal secret
// (the relay rooms view, /metrics) and decodes JSON into out, or returns
// the body when out is nil.
func (f *fleet) private(ctx context.Context, m machine, path string, out any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base(m)+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(wire.HeaderInternalSecret, wire.SendSecret(f.secret))
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s on %s: %d", path, m.ID, resp.StatusCode)
	}
	if out != nil {
		return b, json.Unmarshal(b, out)
	}
	return b, nil
}

// metric reads one unlabelled Prometheus gauge from a metrics text body.
func metric(body []byte, name string) (float64, bool) {
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len(name)+1:]), 64)
			return v, err == nil
		}
	}
	return 0, false
}
