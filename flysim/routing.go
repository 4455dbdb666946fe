package flysim

import (
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Request headers a client may set to steer the proxy.
const (
	headerForceInstance  = "fly-force-instance-id"
	headerPreferInstance = "fly-prefer-instance-id"
	headerForceRegion    = "fly-force-region"
	headerPreferRegion   = "fly-prefer-region"
)

func (m *machine) targetLocked() target {
	return target{id: m.id, region: m.region, addr: net.JoinHostPort(m.ip, strconv.Itoa(m.internalPortLocked()))}
}

// pick chooses the machine for a new request. fly-force-instance-id names a
// machine that must be started (cordon and checks do not matter: that is how
// a deploy tool reaches one machine); otherwise only routable machines
// count: fly-force-region restricts them, fly-prefer-instance-id and
// fly-prefer-region are honoured when possible, and by default machines in
// the proxy's own (edge) region are preferred. Ties are broken at random.
// With none to route to, the request is held up to Platform.ProxyHold for
// one to become healthy, then answered 503.
func (p *proxy) pick(r *http.Request) (target, error) {
	t, wait, err := p.pickOnce(r)
	if wait == nil || p.s.cfg.Platform.ProxyHold.Duration <= 0 {
		return t, err
	}
	hold := time.NewTimer(p.s.cfg.Platform.ProxyHold.Duration)
	defer hold.Stop()
	for {
		select {
		case <-wait:
		case <-hold.C:
			t, _, err := p.pickOnce(r)
			return t, err
		case <-r.Context().Done():
			return target{}, err
		}
		if t, wait, err = p.pickOnce(r); wait == nil {
			return t, err
		}
	}
}

// pickOnce is one look at the app's machines. When nothing can be routed
// to and another look may find something, it also answers the channel
// that closes at the app's next change.
func (p *proxy) pickOnce(r *http.Request) (target, <-chan struct{}, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	a := p.app
	if id := strings.TrimSpace(r.Header.Get(headerForceInstance)); id != "" {
		m := a.machines[id]
		if m == nil || m.state != StateStarted || m.hostDown {
			return target{}, nil, errf(http.StatusServiceUnavailable, "instance %s of app %s is not started", id, a.cfg.Name)
		}
		return m.targetLocked(), nil, nil
	}
	cands := s.routableLocked(a)
	if fr := regionList(r.Header.Get(headerForceRegion)); len(fr) > 0 {
		cands = inRegions(cands, fr)
	}
	if len(cands) == 0 {
		return target{}, a.changed, errf(http.StatusServiceUnavailable, "no started machine of app %s passes its checks", a.cfg.Name)
	}
	if id := strings.TrimSpace(r.Header.Get(headerPreferInstance)); id != "" {
		for _, m := range cands {
			if m.id == id {
				return m.targetLocked(), nil, nil
			}
		}
	}
	prefer := regionList(r.Header.Get(headerPreferRegion))
	if len(prefer) == 0 {
		prefer = []string{a.cfg.EdgeRegion}
	}
	if near := inRegions(cands, prefer); len(near) > 0 {
		cands = near
	}
	return cands[rand.IntN(len(cands))].targetLocked(), nil, nil
}

func (s *Sim) routableLocked(a *app) []*machine {
	var out []*machine
	for _, m := range a.order {
		if m.routableLocked(&s.cfg.Platform) {
			out = append(out, m)
		}
	}
	return out
}

func inRegions(ms []*machine, regions []string) []*machine {
	var out []*machine
	for _, m := range ms {
		if slices.Contains(regions, m.region) {
			out = append(out, m)
		}
	}
	return out
}

func regionList(v string) []string {
	var out []string
	for _, r := range strings.Split(strings.Trim(v, `" `), ",") {
		if r = strings.ToLower(strings.TrimSpace(r)); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// replay is a parsed Fly-Replay response header.
type replay struct {
	instance       string
	regions        []string
	app            string
	preferInstance string
	state          string
	elsewhere      bool
	fallback       string // force_self or prefer_self
}

// parseReplay reads "instance=x;region=ams;state=s;..." leniently: unknown
// fields are ignored, values may be quoted, region may be a list.
func parseReplay(v string) replay {
	var rp replay
	for _, f := range strings.Split(v, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			continue
		}
		val = strings.Trim(strings.TrimSpace(val), `"`)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "instance":
			rp.instance = val
		case "region":
			rp.regions = regionList(val)
		case "app":
			rp.app = val
		case "prefer_instance":
			rp.preferInstance = val
		case "state":
			rp.state = val
		case "elsewhere":
			rp.elsewhere = val == "true"
		case "fallback":
			rp.fallback = val
		}
	}
	return rp
}

// replayTarget chooses where a replayed request goes. With a fallback
// (prefer_self or force_self) a replay that finds no target goes back to the
// sender, marked as replayed.
func (p *proxy) replayTarget(rp replay, sender target) (target, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	a := p.app
	if rp.app != "" {
		if a = s.existingAppLocked(rp.app); a == nil {
			return target{}, errf(http.StatusBadGateway, "Fly-Replay from machine %s names unknown app %q", sender.id, rp.app)
		}
	}
	fail := func(format string, args ...any) (target, error) {
		if rp.fallback == "prefer_self" || rp.fallback == "force_self" {
			return sender, nil
		}
		return target{}, errf(http.StatusServiceUnavailable, format, args...)
	}
	if rp.instance != "" {
		m := a.machines[rp.instance]
		if m == nil || m.state != StateStarted || m.hostDown {
			return fail("Fly-Replay target instance %s of app %s is not started", rp.instance, a.cfg.Name)
		}
		return m.targetLocked(), nil
	}
	cands := s.routableLocked(a)
	if len(rp.regions) > 0 {
		cands = inRegions(cands, rp.regions)
	}
	others := slices.DeleteFunc(slices.Clone(cands), func(m *machine) bool { return m.id == sender.id })
	if rp.elsewhere || len(others) > 0 {
		cands = others
	}
	if len(cands) == 0 {
		return fail("no machine of app %s matches Fly-Replay from machine %s", a.cfg.Name, sender.id)
	}
	for _, m := range cands {
		if m.id == rp.preferInstance {
			return m.targetLocked(), nil
		}
	}
	return cands[rand.IntN(len(cands))].targetLocked(), nil
}
