package flysim

import "net/netip"

// udpRoute is where one UDP service's datagrams go for a while. A new one
// replaces it whenever the app's machines change; a stored one is never
// modified.
type udpRoute struct {
	serving string         // id of the machine serving the service, "" when none
	target  netip.AddrPort // its <ip>:<internal port>; invalid when none
	// noIPv4 is set while the app has no dedicated IPv4: Fly carries UDP on
	// a dedicated IPv4 only, so every datagram is dropped.
	noIPv4 bool
	// members are the service addresses of every machine of the app whose
	// config has the service (address -> id): where answers may come from.
	members map[netip.AddrPort]string
}

// open makes the first pick and lets watch follow the app from there. Start
// calls it once the app is up, so the first pick does not depend on which
// machine passed its checks first: it is the oldest one of the edge region,
// and the sticky pick then keeps it.
func (f *udpForwarder) open() {
	f.s.mu.Lock()
	r := f.routeLocked("")
	f.s.mu.Unlock()
	f.setRoute(r)
	close(f.ready)
}

// watch keeps the route current: it recomputes it at every change of any
// machine of the app (state, cordon, checks, config), from open until
// close.
func (f *udpForwarder) watch() {
	defer f.wg.Done()
	select {
	case <-f.ready:
	case <-f.done:
		return
	}
	s := f.s
	for {
		s.mu.Lock()
		r := f.routeLocked(f.route.Load().serving)
		ch := f.app.changed
		s.mu.Unlock()
		f.setRoute(r)
		select {
		case <-ch:
		case <-f.done:
			return
		}
	}
}

// routeLocked picks the machine to serve the service, Fly's way for UDP: one
// machine takes all of it (no balancing). It must be routable as for the
// proxy (started, uncordoned, checks passing) and have the service in its
// config. The current one is kept while it qualifies (sticky); otherwise the
// oldest qualifying machine in the edge region wins, else the oldest
// anywhere (Fly does not say which; a fixed order makes rehearsals repeat).
// An app without a dedicated IPv4 gets no UDP at all.
func (f *udpForwarder) routeLocked(prev string) *udpRoute {
	port := f.svc.InternalPort
	r := &udpRoute{members: map[netip.AddrPort]string{}}
	for _, m := range f.app.order {
		if m.state == StateDestroyed || !m.servesUDPLocked(port) {
			continue
		}
		if ip, err := netip.ParseAddr(m.ip); err == nil {
			r.members[netip.AddrPortFrom(ip, uint16(port))] = m.id
		}
	}
	if !f.app.hasDedicatedV4Locked() {
		r.noIPv4 = true
		return r
	}
	var cands []*machine
	for _, m := range f.s.routableLocked(f.app) {
		if m.servesUDPLocked(port) {
			cands = append(cands, m)
		}
	}
	pick := pickUDP(cands, prev, f.app.cfg.EdgeRegion)
	if pick == nil {
		return r
	}
	if ip, err := netip.ParseAddr(pick.ip); err == nil {
		r.serving, r.target = pick.id, netip.AddrPortFrom(ip, uint16(port))
	}
	return r
}

func pickUDP(cands []*machine, prev, edge string) *machine {
	for _, m := range cands {
		if m.id == prev {
			return m
		}
	}
	if near := inRegions(cands, []string{edge}); len(near) > 0 {
		return near[0]
	}
	if len(cands) > 0 {
		return cands[0]
	}
	return nil
}

// setRoute stores r; a new serving machine is logged, counted and
// announced. Every flow follows at once (they read the route per datagram):
// the previous machine's sessions break, as on Fly.
func (f *udpForwarder) setRoute(r *udpRoute) {
	prev := f.route.Swap(r)
	if prev.serving == r.serving {
		return
	}
	if r.serving != "" {
		f.met.switches.Inc()
	}
	f.s.log.Info("udp service served by a new machine", "app", f.app.cfg.Name, "port", f.svc.InternalPort,
		"machine", r.serving, "previous", prev.serving)
	f.mu.Lock()
	f.touchLocked()
	f.mu.Unlock()
}
