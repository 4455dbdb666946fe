package flysim

import "time"

// newApp is the record of a configured app. An app the config declares with
// its machines exists from the start, with the addresses Fly gives a
// deployed app (a shared IPv4 and an IPv6, plus a dedicated IPv4 when it has
// UDP services, which Fly carries on a dedicated IPv4 only) and its
// [apps.secrets]; a reserved one waits for POST /v1/apps.
func newApp(ac *AppConfig, now time.Time) *app {
	a := &app{cfg: ac, machines: map[string]*machine{}, changed: make(chan struct{})}
	if ac.Reserved {
		return a
	}
	a.created, a.createdAt = true, now
	a.ips = []*ipAssignment{
		{kind: IPSharedV4, region: ipRegionGlobal, createdAt: now},
		{kind: IPV6, region: ipRegionGlobal, createdAt: now},
	}
	if len(ac.UDP) > 0 {
		a.ips = append(a.ips, &ipAssignment{kind: IPV4, region: ipRegionGlobal, createdAt: now})
	}
	if len(ac.Secrets) > 0 {
		values := make(map[string]*string, len(ac.Secrets))
		for k, v := range ac.Secrets {
			values[k] = &v
		}
		a.setSecretsLocked(values, now) // a's own: nobody else sees it yet
	}
	return a
}

// existingAppLocked is the app of that name if it exists (a reserved app
// only once created), else nil.
func (s *Sim) existingAppLocked(name string) *app {
	if a := s.apps[name]; a != nil && a.created {
		return a
	}
	return nil
}
