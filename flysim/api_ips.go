package flysim

import (
	"crypto/sha256"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Kinds of IP assignment (flaps AssignIPRequest.Type).
const (
	IPV4        = "v4"         // dedicated IPv4: the host of the app's proxy address; carries UDP
	IPSharedV4  = "shared_v4"  // shared IPv4: SharedIPv4, HTTP only
	IPV6        = "v6"         // public IPv6: a stable per-app address in 2001:db8::/32
	IPPrivateV6 = "private_v6" // Flycast: a stable per-app address in fdaa::/16
)

// SharedIPv4 is the shared IPv4 address every app that asks for one gets
// (TEST-NET-1: a label, not an address to dial; HTTP reaches an app at its
// proxy URL whatever its assignments say).
const SharedIPv4 = "192.0.2.1"

// ipRegionGlobal is the region of an anycast assignment, as Fly lists it.
const ipRegionGlobal = "global"

// ipAssignment is one public address of an app, guarded by Sim.mu with it.
// The address itself is derived (ipOfLocked), so it follows the proxy.
type ipAssignment struct {
	kind        string
	region      string
	serviceName string
	createdAt   time.Time
}

// ipAssignmentJSON is flaps' IPAssignment.
type ipAssignmentJSON struct {
	IP          string    `json:"ip"`
	Region      string    `json:"region"`
	ServiceName string    `json:"service_name"`
	Shared      bool      `json:"shared"`
	CreatedAt   time.Time `json:"created_at"`
}

// assignIPRequest is flaps' AssignIPRequest.
type assignIPRequest struct {
	Type         string `json:"type"`
	Region       string `json:"region"`
	Organization string `json:"org_slug"`
	Network      string `json:"network"`
	ServiceName  string `json:"service_name"`
}

// ipOfLocked is the address of an assignment of a.
func (a *app) ipOfLocked(kind string) string {
	switch kind {
	case IPV4:
		return a.publicIPv4Locked()
	case IPSharedV4:
		return SharedIPv4
	case IPV6:
		return hashedIPv6(0x2001_0db8, a.cfg.Name)
	default: // IPPrivateV6
		return hashedIPv6(0xfdaa_0000, a.cfg.Name)
	}
}

// publicIPv4Locked is the host of the app's proxy address: its one public
// IP for HTTP and UDP (udp_config.go), what a dedicated IPv4 is on Fly.
func (a *app) publicIPv4Locked() string {
	addr := a.cfg.Proxy
	if a.proxy != nil {
		addr = hostPortOf(a.proxy.url)
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
		return ip.Unmap().String()
	}
	return "127.0.0.1" // a proxy bound on every address is reached there
}

// hashedIPv6 is prefix (the first 32 bits) followed by 96 bits of the
// name's SHA-256: stable for an app, distinct between apps.
func hashedIPv6(prefix uint32, name string) string {
	h := sha256.Sum256([]byte(name))
	var b [16]byte
	b[0], b[1], b[2], b[3] = byte(prefix>>24), byte(prefix>>16), byte(prefix>>8), byte(prefix)
	copy(b[4:], h[:12])
	return netip.AddrFrom16(b).String()
}

// hasDedicatedV4Locked reports whether a has a dedicated IPv4, without
// which Fly carries no UDP to it.
func (a *app) hasDedicatedV4Locked() bool {
	for _, ip := range a.ips {
		if ip.kind == IPV4 {
			return true
		}
	}
	return false
}

func (a *app) ipJSONLocked(ip *ipAssignment) ipAssignmentJSON {
	return ipAssignmentJSON{
		IP: a.ipOfLocked(ip.kind), Region: ip.region, ServiceName: ip.serviceName,
		Shared: ip.kind == IPSharedV4, CreatedAt: ip.createdAt.UTC(),
	}
}

// listIPs is GET /v1/apps/{app}/ip_assignments (flaps GetIPAssignments).
func (a *apiServer) listIPs(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	out := []ipAssignmentJSON{}
	for _, ip := range ap.ips {
		out = append(out, ap.ipJSONLocked(ip))
	}
	writeJSON(w, http.StatusOK, map[string]any{"ips": out})
	return nil
}

// assignIP is POST /v1/apps/{app}/ip_assignments (flaps AssignIP). An app
// has at most one address of each kind: a second one is refused (flysim
// has one public IPv4 per app, its proxy's host). A dedicated IPv4 lets
// UDP through to the app's machines at once.
func (a *apiServer) assignIP(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	var in assignIPRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	switch in.Type {
	case IPV4, IPSharedV4, IPV6, IPPrivateV6:
	default:
		return errf(http.StatusBadRequest, "unknown ip type %q (want %s, %s, %s or %s)", in.Type, IPV4, IPSharedV4, IPV6, IPPrivateV6)
	}
	if err := a.checkOrg(in.Organization); err != nil {
		return err
	}
	region := in.Region
	if region == "" {
		region = ipRegionGlobal
	}
	if region != ipRegionGlobal && !regionRE.MatchString(region) {
		return errf(http.StatusBadRequest, "invalid region %q", region)
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ip := range ap.ips {
		if ip.kind == in.Type {
			return errf(http.StatusUnprocessableEntity, "app %s already has a %s address (%s): flysim gives an app one of each kind",
				ap.cfg.Name, in.Type, ap.ipOfLocked(ip.kind))
		}
	}
	ip := &ipAssignment{kind: in.Type, region: region, serviceName: in.ServiceName, createdAt: s.clk.Now()}
	ap.ips = append(ap.ips, ip)
	ap.touchLocked() // the UDP forwarders re-route
	writeJSON(w, http.StatusOK, ap.ipJSONLocked(ip))
	return nil
}

// deleteIP is DELETE /v1/apps/{app}/ip_assignments/{ip} (flaps
// DeleteIPAssignment). Without its dedicated IPv4 an app gets no more UDP.
func (a *apiServer) deleteIP(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	want := r.PathValue("ip")
	if p, err := netip.ParseAddr(want); err == nil {
		want = p.String() // the canonical form, as listed
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ip := range ap.ips {
		if ap.ipOfLocked(ip.kind) == want {
			ap.ips = append(ap.ips[:i:i], ap.ips[i+1:]...)
			ap.touchLocked()
			writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
			return nil
		}
	}
	return errf(http.StatusNotFound, "ip assignment %s not found", want)
}
