//go:build unix

package flysim

import (
	"context"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"

	"github.com/purrfly/purrfly/internal/testutil"
)

// lookup asks the Sim's DNS server one question.
func lookup(t *testing.T, s *Sim, name string, qtype uint16, proto string) (*dns.Msg, []string) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
	in, _, err := c.Exchange(m, s.State().DNS)
	if err != nil {
		t.Fatalf("%s %s: %v", dns.TypeToString[qtype], name, err)
	}
	var out []string
	for _, rr := range in.Answer {
		if rr.Header().Ttl != DNSTTL {
			t.Errorf("%s: TTL %d", name, rr.Header().Ttl)
		}
		switch v := rr.(type) {
		case *dns.TXT:
			out = append(out, strings.Join(v.Txt, ""))
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.AAAA:
			out = append(out, v.AAAA.String())
		}
	}
	sort.Strings(out)
	return in, out
}

func txt(t *testing.T, s *Sim, name string) string {
	t.Helper()
	_, out := lookup(t, s, name, dns.TypeTXT, "udp")
	return strings.Join(out, "|")
}

// TestDNS: the .internal names answer from live machine state, follow stop
// and create within one TTL, and a machine can query them itself through
// FLY_DNS_SERVER.
func TestDNS(t *testing.T) {
	s := startSim(t, testConfig())
	ids := machineIDs(s, "web")
	sorted := slices.Sorted(slices.Values(ids))
	ip := func(id string) string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.apps["web"].machines[id].ip
	}
	region := map[string]string{ids[0]: "ams", ids[1]: "sea"}
	both := sorted[0] + " " + region[sorted[0]] + "," + sorted[1] + " " + region[sorted[1]]

	if got := txt(t, s, "vms.web.internal"); got != both {
		t.Fatalf("vms.web.internal = %q, want %q", got, both)
	}
	if got := txt(t, s, "regions.web.internal"); got != "ams,sea" {
		t.Fatalf("regions = %q", got)
	}
	if _, got := lookup(t, s, "web.internal", dns.TypeA, "udp"); !slices.Equal(got, slices.Sorted(slices.Values([]string{ip(ids[0]), ip(ids[1])}))) {
		t.Fatalf("web.internal A = %v", got)
	}
	if _, got := lookup(t, s, "sea.web.internal", dns.TypeA, "tcp"); !slices.Equal(got, []string{ip(ids[1])}) {
		t.Fatalf("sea.web.internal A (tcp) = %v", got)
	}
	if _, got := lookup(t, s, ids[0]+".vm.web.internal", dns.TypeAAAA, "udp"); len(got) != 1 || net.ParseIP(got[0]).To4().String() != ip(ids[0]) {
		t.Fatalf("<id>.vm AAAA = %v", got)
	}
	if in, _ := lookup(t, s, "nope.internal", dns.TypeA, "udp"); in.Rcode != dns.RcodeNameError {
		t.Fatalf("nope.internal rcode %d", in.Rcode)
	}
	if in, _ := lookup(t, s, "example.com", dns.TypeA, "udp"); in.Rcode != dns.RcodeRefused {
		t.Fatalf("example.com rcode %d", in.Rcode)
	}
	// From inside a machine, through FLY_DNS_SERVER.
	status, body := get(t, s.AppURL("web")+"/dns?name=vms.web.internal", map[string]string{"fly-force-instance-id": ids[0]})
	if status != 200 || string(body) != both {
		t.Fatalf("machine's own lookup: %d %q", status, body)
	}

	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Stop: the machine leaves vms. and the region list, stays in all.vms.
	if err := fc.Stop(ctx, "web", fly.StopMachineInput{ID: ids[1]}, ""); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, DNSTTL*time.Second, "stopped machine out of vms.", func() bool {
		return txt(t, s, "vms.web.internal") == ids[0]+" ams"
	})
	if started, err := fc.List(ctx, "web", "started"); err != nil || len(started) != 1 || started[0].ID != ids[0] {
		t.Fatalf("List started = %v, %v", started, err)
	}
	if got := txt(t, s, "all.vms.web.internal"); got != both {
		t.Fatalf("all.vms after stop = %q", got)
	}
	if got := txt(t, s, "regions.web.internal"); got != "ams" {
		t.Fatalf("regions after stop = %q", got)
	}
	// Create: a new machine appears once started.
	m, err := fc.Launch(ctx, "web", fly.LaunchMachineInput{Region: "fra", Config: &fly.MachineConfig{Image: "child:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fc.Wait(ctx, "web", m.ID, flaps.WithWaitStates("started"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, DNSTTL*time.Second, "created machine in vms.", func() bool {
		return strings.Contains(txt(t, s, "vms.web.internal"), m.ID+" fra")
	})
	if _, got := lookup(t, s, "fra.web.internal", dns.TypeA, "udp"); !slices.Equal(got, []string{m.PrivateIP}) {
		t.Fatalf("fra.web.internal = %v, want %s", got, m.PrivateIP)
	}
	// Start again: back in vms.
	if _, err := fc.Start(ctx, "web", ids[1], ""); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, DNSTTL*time.Second, "restarted machine back in vms.", func() bool {
		return strings.Contains(txt(t, s, "vms.web.internal"), ids[1]+" sea")
	})
}

// TestSplitTXT: long values are cut into 255-byte strings.
func TestSplitTXT(t *testing.T) {
	long := strings.Repeat("0123456789abcd ams,", 40)
	parts := splitTXT(long)
	if strings.Join(parts, "") != long || len(parts) != 3 || len(parts[0]) != 255 {
		t.Fatalf("splitTXT: %d parts", len(parts))
	}
}
