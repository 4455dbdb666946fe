package wire

import "testing"

// Rule: SameRoute compares the immutable routing metadata (endpoint, public
// endpoint, host, region, the three ports, ssl) and nothing else: a change in any of them
// is another route, a change in the process facts is not.
func TestSameRouteComparesTheRoutingFields(t *testing.T) {
	a := RelayInfo{BootID: "b1", Endpoint: "http://r:8080", Host: "r.example", Region: "ams",
		Port: 443, UDPPort: 7000, UDPPortV2: 7001, SSL: true, MachineID: "m1", ImageRef: "i1", Version: "v1"}
	if !a.SameRoute(a) {
		t.Fatal("an info is not the same route as itself")
	}
	facts := a
	facts.BootID, facts.MachineID, facts.ImageRef, facts.Version = "b2", "m2", "i2", "v2"
	if !a.SameRoute(facts) {
		t.Fatal("changed process facts made another route")
	}
	for name, change := range map[string]func(*RelayInfo){
		"endpoint":  func(i *RelayInfo) { i.Endpoint = "http://other:8080" },
		"public":    func(i *RelayInfo) { i.PublicEndpoint = "https://app.example" },
		"host":      func(i *RelayInfo) { i.Host = "other.example" },
		"region":    func(i *RelayInfo) { i.Region = "fra" },
		"port":      func(i *RelayInfo) { i.Port = 444 },
		"udpPort":   func(i *RelayInfo) { i.UDPPort = 7002 },
		"udpPortV2": func(i *RelayInfo) { i.UDPPortV2 = 7003 },
		"ssl":       func(i *RelayInfo) { i.SSL = false },
	} {
		b := a
		change(&b)
		if a.SameRoute(b) || b.SameRoute(a) {
			t.Errorf("a changed %s is still the same route", name)
		}
	}
}
