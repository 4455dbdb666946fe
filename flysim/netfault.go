package flysim

import (
	"errors"
	"fmt"
	"time"
)

// Kinds of NetFault.
const (
	// NetDNSStale: the app's .internal answers stay those of the moment of
	// injection (the machine set then, started or not) for DurationMS,
	// whatever starts or stops meanwhile: the stale answers a resolver
	// cache or a lagging Fly DNS gives.
	NetDNSStale = "dns_stale"
	// NetLinkDelay: every chunk through the link waits DelayMS.
	NetLinkDelay = "link_delay"
	// NetLinkDrop: every open connection of the link is cut now, and new
	// ones are closed at once, for DurationMS.
	NetLinkDrop = "link_drop"
	// NetLinkPartition: nothing passes the link either way for DurationMS:
	// open connections stall, new ones are held unanswered (a black hole);
	// then what waited passes.
	NetLinkPartition = "link_partition"
	// NetHeal ends the faults of Link and of App's DNS at once.
	NetHeal = "heal"
	// NetHostDown fails Host, or the host of Machine (host.go); it lasts
	// until NetHostUp.
	NetHostDown = "host_down"
	// NetHostUp brings Host, or Machine's host, back.
	NetHostUp = "host_up"
)

// maxNetFaultDuration bounds how long one NetFault lasts.
const maxNetFaultDuration = 10 * time.Minute

// NetFault makes the network between machines misbehave for a while
// (Sim.InjectNetFault, or POST /flysim/v1/faults with a "kind" field).
// Every one ends by itself after DurationMS.
type NetFault struct {
	Kind string `json:"kind"`
	// App is the app whose DNS answers go stale (NetDNSStale, NetHeal).
	App string `json:"app,omitempty"`
	// Link names a [[links]] entry (the link kinds, NetHeal).
	Link       string `json:"link,omitempty"`
	DelayMS    int    `json:"delay_ms,omitempty"`
	DurationMS int    `json:"duration_ms,omitempty"`
	// Host, or the host of Machine (NetHostDown, NetHostUp).
	Host    string `json:"host,omitempty"`
	Machine string `json:"machine,omitempty"`
}

// HostFault applies a NetHostDown or NetHostUp fault and answers the host
// and the machines it holds.
func (s *Sim) HostFault(f NetFault) (string, []string, error) {
	host := f.Host
	if host == "" {
		host = s.MachineHost(f.Machine)
		if host == "" {
			return "", nil, fmt.Errorf("unknown machine %q", f.Machine)
		}
	}
	var ids []string
	var err error
	switch f.Kind {
	case NetHostDown:
		ids, err = s.FailHost(host)
	case NetHostUp:
		ids, err = s.RestoreHost(host)
	default:
		err = fmt.Errorf("not a host fault: %q", f.Kind)
	}
	return host, ids, err
}

// staleDNS is an app's frozen machine set (Sim.dnsStale).
type staleDNS struct {
	ms    []dnsMachine
	until time.Time
}

// InjectNetFault applies f at once.
func (s *Sim) InjectNetFault(f NetFault) error {
	d := time.Duration(f.DurationMS) * time.Millisecond
	if f.Kind != NetHeal && (d <= 0 || d > maxNetFaultDuration) {
		return fmt.Errorf("duration_ms must be 1 to %d", maxNetFaultDuration.Milliseconds())
	}
	s.mu.Lock()
	l := s.links[f.Link]
	_, appOK := s.apps[f.App]
	s.mu.Unlock()
	switch f.Kind {
	case NetDNSStale:
		if !appOK {
			return fmt.Errorf("unknown app %q", f.App)
		}
		ms, _ := s.liveDNSMachines(f.App)
		s.mu.Lock()
		s.dnsStale[f.App] = &staleDNS{ms: ms, until: s.clk.Now().Add(d)}
		s.mu.Unlock()
	case NetLinkDelay, NetLinkDrop, NetLinkPartition:
		if l == nil {
			return fmt.Errorf("unknown link %q", f.Link)
		}
		if f.Kind == NetLinkDelay && (f.DelayMS <= 0 || f.DelayMS > 60_000) {
			return errors.New("delay_ms must be 1 to 60000")
		}
		l.set(linkMode{kind: f.Kind, delay: time.Duration(f.DelayMS) * time.Millisecond, until: s.clk.Now().Add(d)})
	case NetHeal:
		if l == nil && !appOK {
			return errors.New("heal needs a known link or app")
		}
		if l != nil {
			l.set(linkMode{})
		}
		if appOK {
			s.mu.Lock()
			delete(s.dnsStale, f.App)
			s.mu.Unlock()
		}
	default:
		return fmt.Errorf("unknown network fault kind %q", f.Kind)
	}
	s.met.netFaults.WithLabelValues(f.Kind).Inc()
	s.log.Info("network fault injected", "kind", f.Kind, "app", f.App, "link", f.Link, "delay_ms", f.DelayMS, "duration_ms", f.DurationMS)
	return nil
}

// LinkURL is the http:// address of a link ("" if unknown or not started).
func (s *Sim) LinkURL(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.links[name]; l != nil {
		return l.url
	}
	return ""
}
