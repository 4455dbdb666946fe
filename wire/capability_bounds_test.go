package wire

import (
	"errors"
	"strings"
	"testing"
)

// Rule: a capability is usable with a host of 1..253 bytes (not blank), a
// secret of 1..MaxSecretLen bytes, port and udpPortV2 in 1..65535 and
// udpPort in 0..65535.
func TestCapabilityBounds(t *testing.T) {
	ok := Capability{Host: "h", Secret: "s", Port: 1, UDPPort: 0, UDPPortV2: 1}
	for name, c := range map[string]func(*Capability){
		"host of 253 bytes":          func(c *Capability) { c.Host = strings.Repeat("h", 253) },
		"secret of MaxSecretLen":     func(c *Capability) { c.Secret = strings.Repeat("s", MaxSecretLen) },
		"ports at 65535":             func(c *Capability) { c.Port, c.UDPPort, c.UDPPortV2 = 65535, 65535, 65535 },
		"ports at their lower bound": func(*Capability) {},
	} {
		v := ok
		c(&v)
		if err := v.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, c := range map[string]func(*Capability){
		"blank host":               func(c *Capability) { c.Host = "  " },
		"host of 254 bytes":        func(c *Capability) { c.Host = strings.Repeat("h", 254) },
		"no secret":                func(c *Capability) { c.Secret = "" },
		"secret past MaxSecretLen": func(c *Capability) { c.Secret = strings.Repeat("s", MaxSecretLen+1) },
		"port 0":                   func(c *Capability) { c.Port = 0 },
		"port 65536":               func(c *Capability) { c.Port = 65536 },
		"udpPortV2 0":              func(c *Capability) { c.UDPPortV2 = 0 },
		"udpPortV2 65536":          func(c *Capability) { c.UDPPortV2 = 65536 },
		"udpPort -1":               func(c *Capability) { c.UDPPort = -1 },
		"udpPort 65536":            func(c *Capability) { c.UDPPort = 65536 },
	} {
		v := ok
		c(&v)
		if err := v.Validate(); !errors.Is(err, ErrRelayBadAnswer) {
			t.Errorf("%s: %v, want relay_bad_answer", name, err)
		}
	}
}
