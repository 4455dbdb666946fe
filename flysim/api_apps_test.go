//go:build unix

package flysim

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	fly "github.com/superfly/fly-go"
	"github.com/superfly/fly-go/flaps"

	"github.com/purrfly/purrfly/internal/testutil"
)

// reservedConfig is udpConfig plus "fresh", a reserved app (primary region
// sea) with a UDP service on udpPort.
func reservedConfig() *Config {
	cfg := udpConfig()
	cfg.Apps = append(cfg.Apps, &AppConfig{
		Name: "fresh", PrimaryRegion: "sea", Reserved: true,
		UDP: []*UDPService{{InternalPort: udpPort}},
	})
	return cfg
}

// launchConfig is the machine config flyctl would send for "fresh": an
// http service on 8080, the UDP service, PRIMARY_REGION in the env.
func launchConfig(image string, env map[string]string) *fly.MachineConfig {
	p80, pUDP := 80, udpPort
	return &fly.MachineConfig{
		Image: image, Env: env,
		Services: []fly.MachineService{
			{Protocol: "tcp", InternalPort: 8080, Ports: []fly.MachinePort{{Port: &p80, Handlers: []string{"http"}}}},
			{Protocol: "udp", InternalPort: udpPort, Ports: []fly.MachinePort{{Port: &pUDP}}},
		},
	}
}

func flapsStatus(err error) int {
	var ferr *flaps.FlapsError
	if errors.As(err, &ferr) {
		return ferr.ResponseStatusCode
	}
	return 0
}

// TestCreateAppLaunchWithSecrets: a reserved app is unknown to the API and
// DNS until CreateApp; a second CreateApp is a 422, so is one of an app the
// config does not reserve, and another org a 404. Once created, the app's
// secrets (listed without values) reach a machine launched into it, over
// the config's env of the same name; a change reaches it on its next boot.
// PRIMARY_REGION comes from the config's env.
func TestCreateAppLaunchWithSecrets(t *testing.T) {
	s := startSim(t, reservedConfig())
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := fc.GetApp(ctx, "fresh"); err == nil || err.Error() != "app not found" {
		t.Fatalf("GetApp before creation: %v, want app not found", err)
	}
	if status, body := apiDo(t, s, "GET", "/v1/apps/fresh/machines", testToken, nil); status != http.StatusNotFound || body["error"] != "app not found" {
		t.Fatalf("machines before creation: %d %v", status, body)
	}
	apps, err := fc.ListApps(ctx, flaps.ListAppsRequest{OrgSlug: "personal"})
	if err != nil || len(apps) != 1 || apps[0].Name != "web" {
		t.Fatalf("ListApps before creation = %+v, %v", apps, err)
	}
	if got := txt(t, s, "_apps.internal"); got != "web" {
		t.Fatalf("_apps.internal before creation = %q", got)
	}
	if st := s.State().Apps["fresh"]; !st.Reserved || st.URL == "" || st.UDP["7778"] == "" {
		t.Fatalf("State of the reserved app = %+v", st)
	}

	if _, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: "fresh", Org: "someone-else"}); flapsStatus(err) != http.StatusNotFound {
		t.Fatalf("CreateApp in another org: %v, want a 404", err)
	}
	if _, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: "elsewhere", Org: "personal"}); flapsStatus(err) != http.StatusUnprocessableEntity ||
		!strings.Contains(err.Error(), "reserved") {
		t.Fatalf("CreateApp of an app the config does not reserve: %v, want a 422 naming reserved", err)
	}
	app, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: "fresh", Org: "personal"})
	if err != nil || app.Name != "fresh" || app.Organization.Slug != "personal" || app.MachineCount != 0 {
		t.Fatalf("CreateApp = %+v, %v", app, err)
	}
	for _, name := range []string{"fresh", "web"} {
		_, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: name, Org: "personal"})
		if flapsStatus(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "Name has already been taken") {
			t.Fatalf("CreateApp of existing %s: %v, want a 422", name, err)
		}
	}
	if got, err := fc.GetApp(ctx, "fresh"); err != nil || got.Name != "fresh" {
		t.Fatalf("GetApp after creation = %+v, %v", got, err)
	}
	if got := txt(t, s, "_apps.internal"); got != "web,fresh" {
		t.Fatalf("_apps.internal after creation = %q", got)
	}
	if s.State().Apps["fresh"].Reserved {
		t.Fatal("State still marks the created app reserved")
	}

	// Secrets: set two, list them without values.
	v1, other := "from-secret", "other"
	up, err := fc.UpdateAppSecrets(ctx, "fresh", map[string]*string{"APP_ENV": &v1, "OTHER": &other})
	if err != nil || up.Version != 1 || len(up.Secrets) != 2 {
		t.Fatalf("UpdateAppSecrets = %+v, %v", up, err)
	}
	list, err := fc.ListAppSecrets(ctx, "fresh", nil, false)
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	if err != nil || len(list) != 2 || list[0].Name != "APP_ENV" || list[0].Value != nil || !hex16.MatchString(list[0].Digest) ||
		list[0].Digest == list[1].Digest || list[0].CreatedAt == nil {
		t.Fatalf("ListAppSecrets = %+v, %v", list, err)
	}
	if shown, err := fc.ListAppSecrets(ctx, "fresh", nil, true); err != nil || shown[0].Value == nil || *shown[0].Value != v1 {
		t.Fatalf("ListAppSecrets(show) = %+v, %v", shown, err)
	}

	m, err := fc.Launch(ctx, "fresh", fly.LaunchMachineInput{
		Config: launchConfig("child:v1", map[string]string{"APP_ENV": "from-env", "PRIMARY_REGION": "lhr"}),
	})
	if err != nil || m.Region != "sea" {
		t.Fatalf("Launch = %+v, %v", m, err)
	}
	if err := fc.Wait(ctx, "fresh", m.ID, flaps.WithWaitStates("started"), flaps.WithWaitTimeout(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	p := pingEventually(t, s, "fresh", m.ID, "the new machine answering", func(pingInfo) bool { return true })
	if p.App != "fresh" || p.AppEnv != v1 || p.Primary != "lhr" || p.Region != "sea" {
		t.Fatalf("machine env = %+v, want APP_ENV from the secret and PRIMARY_REGION lhr", p)
	}

	// A change reaches the machine on its next boot, not before.
	set, err := fc.SetAppSecret(ctx, "fresh", "APP_ENV", "changed")
	if err != nil || set.Version != 2 || set.Name != "APP_ENV" || set.Value != nil {
		t.Fatalf("SetAppSecret = %+v, %v", set, err)
	}
	if p := ping(t, s, "fresh", m.ID); p.AppEnv != v1 {
		t.Fatalf("the running boot sees %q", p.AppEnv)
	}
	if err := fc.Restart(ctx, "fresh", fly.RestartMachineInput{ID: m.ID}, ""); err != nil {
		t.Fatal(err)
	}
	pingEventually(t, s, "fresh", m.ID, "the next boot seeing the new secret", func(p pingInfo) bool { return p.AppEnv == "changed" })

	del, err := fc.DeleteAppSecret(ctx, "fresh", "OTHER")
	if err != nil || del.Version != 3 {
		t.Fatalf("DeleteAppSecret = %+v, %v", del, err)
	}
	if _, err := fc.DeleteAppSecret(ctx, "fresh", "OTHER"); flapsStatus(err) != http.StatusNotFound {
		t.Fatalf("second DeleteAppSecret: %v, want a 404", err)
	}
	bad := "x"
	if _, err := fc.UpdateAppSecrets(ctx, "fresh", map[string]*string{"lower": &bad}); flapsStatus(err) != http.StatusBadRequest {
		t.Fatalf("UpdateAppSecrets with a bad name: %v, want a 400", err)
	}
	if list, _ := fc.ListAppSecrets(ctx, "fresh", nil, false); len(list) != 1 {
		t.Fatalf("secrets after the refused change: %+v", list)
	}
}

// TestUDPNeedsDedicatedIPv4: a created app gets no UDP (dropped, counted as
// no_dedicated_ipv4) until it has a dedicated IPv4, the host of its proxy
// address; then datagrams flow, and stop again once it is deleted. The
// configured app starts with its shared IPv4, IPv6 and dedicated IPv4.
func TestUDPNeedsDedicatedIPv4(t *testing.T) {
	s := startSim(t, reservedConfig())
	fc := flapsClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	web, err := fc.GetIPAssignments(ctx, "web")
	if err != nil || len(web.IPs) != 3 || web.IPs[0].IP != SharedIPv4 || !web.IPs[0].Shared ||
		!strings.HasPrefix(web.IPs[1].IP, "2001:db8:") || web.IPs[2].IP != "127.0.0.1" || web.IPs[2].Shared {
		t.Fatalf("web's IPs = %+v, %v", web, err)
	}
	if _, err := fc.GetIPAssignments(ctx, "fresh"); err == nil || !strings.Contains(err.Error(), "app not found") {
		t.Fatalf("GetIPAssignments before creation: %v", err)
	}
	if _, err := fc.CreateApp(ctx, flaps.CreateAppRequest{Name: "fresh", Org: "personal"}); err != nil {
		t.Fatal(err)
	}
	m, err := fc.Launch(ctx, "fresh", fly.LaunchMachineInput{Config: launchConfig("child:udp", map[string]string{"UDP_PORT": "7778"})})
	if err != nil {
		t.Fatal(err)
	}
	waitApp(t, s, "fresh", "the machine routable", func() bool { return routable(s, "fresh", m.ID) })
	pingEventually(t, s, "fresh", m.ID, "the machine listening", func(pingInfo) bool { return true })

	pub, err := netip.ParseAddrPort(s.UDPAddr("fresh", udpPort))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	f := s.apps["fresh"].udp[0]
	s.mu.Unlock()
	dropped := f.met.noIPv4
	c := udpClient(t)
	before := counterValue(t, dropped)
	if _, err := c.WriteToUDPAddrPort([]byte("too early"), pub); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, udpWait, "the datagram dropped as no_dedicated_ipv4", func() bool { return counterValue(t, dropped) > before })

	if _, err := fc.AssignIP(ctx, "fresh", flaps.AssignIPRequest{Type: IPSharedV4}); err != nil {
		t.Fatal(err)
	}
	ip, err := fc.AssignIP(ctx, "fresh", flaps.AssignIPRequest{Type: IPV4, Region: "global"})
	if err != nil || ip.IP != pub.Addr().String() || ip.Shared {
		t.Fatalf("AssignIP v4 = %+v, %v; want %s", ip, err, pub.Addr())
	}
	if _, err := fc.AssignIP(ctx, "fresh", flaps.AssignIPRequest{Type: IPV4}); err == nil {
		t.Fatal("a second dedicated IPv4 was assigned")
	}
	waitUDP(t, f, "the machine serving", func() bool { return f.serving() == m.ID })
	if id, _, body := echo(t, c, pub, []byte("now")); id != m.ID || string(body) != "now" {
		t.Fatalf("echo from %s: %q", id, body)
	}

	if err := fc.DeleteIPAssignment(ctx, "fresh", ip.IP); err != nil {
		t.Fatal(err)
	}
	if got, err := fc.GetIPAssignments(ctx, "fresh"); err != nil || len(got.IPs) != 1 || got.IPs[0].IP != SharedIPv4 {
		t.Fatalf("IPs after the delete = %+v, %v", got, err)
	}
	waitUDP(t, f, "nobody serving", func() bool { return f.serving() == "" })
	before = counterValue(t, dropped)
	if _, err := c.WriteToUDPAddrPort([]byte("too late"), pub); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, udpWait, "the datagram dropped again", func() bool { return counterValue(t, dropped) > before })
}
