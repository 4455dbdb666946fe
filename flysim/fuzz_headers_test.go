package flysim

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseReplay: the Fly-Replay header a machine answers, read leniently
// (unknown fields ignored, values quoted or not, region a list). Its
// regions are non-empty, trimmed and lower case; and the parsed replay,
// written back as a header with quoted values, parses to the same replay
// (unless a value holds a quote, which that form cannot carry).
func FuzzParseReplay(f *testing.F) {
	for _, s := range []string{
		"instance=148e21dad76789", "region=ams,sea;state=abc", `instance="x"; app=purrfly-relay-b; elsewhere=true`,
		"prefer_instance=a;fallback=prefer_self", "region= AMS , ;state=", "garbage", ";;=;", `state="a=b"`, "Region=FRA;INSTANCE=y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		rp := parseReplay(v)
		for _, r := range rp.regions {
			if r == "" || r != strings.TrimSpace(r) || r != strings.ToLower(r) || strings.Contains(r, ",") {
				t.Fatalf("%q: region %q", v, r)
			}
		}
		var parts []string
		add := func(k, val string) {
			if val != "" {
				parts = append(parts, k+`="`+val+`"`)
			}
		}
		add("instance", rp.instance)
		add("region", strings.Join(rp.regions, ","))
		add("app", rp.app)
		add("prefer_instance", rp.preferInstance)
		add("state", rp.state)
		add("fallback", rp.fallback)
		if rp.elsewhere {
			parts = append(parts, "elsewhere=true")
		}
		again := strings.Join(parts, ";")
		if strings.Count(again, `"`) != 2*(len(parts)-btoi(rp.elsewhere)) {
			return // a value holds a quote: quoting cannot write it back
		}
		if back := parseReplay(again); !reflect.DeepEqual(back, rp) {
			t.Fatalf("%q parsed as %+v, written %q, parsed as %+v", v, rp, again, back)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzParseSeconds: the Machines API's ?timeout= ("60" as flaps sends it,
// or "60s"). A decimal n is exactly n seconds, never an overflow into
// another duration; anything else is what time.ParseDuration says.
func FuzzParseSeconds(f *testing.F) {
	for _, s := range []string{"60", "60s", "0", "-5", "1.5", "9223372037", "+3", "03", "", "1h2m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := parseSeconds(v)
		if n, nerr := strconv.Atoi(v); nerr == nil && strconv.Itoa(n) == v {
			if err == nil && (d%time.Second != 0 || int64(d/time.Second) != int64(n)) {
				t.Fatalf("%q read as %v", v, d)
			}
			return
		}
		want, werr := time.ParseDuration(v)
		if (err == nil) != (werr == nil) || err == nil && d != want {
			t.Fatalf("%q read as %v, %v", v, d, err)
		}
	})
}

// FuzzAuthorization: the Machines API's Authorization header, "Bearer T"
// or "FlyV1 T" (the scheme in any case). Both forms of the configured
// token pass, and of an app's deploy token, scoped to that app; whatever
// passes names a scheme and carries the token of its scope.
func FuzzAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer flysim-token", "FlyV1 flysim-token", "bearer  flysim-token ", "Bearer", "Basic flysim-token",
		"FlyV1 fm2_x,Bearer flysim-token", "Bearer FlyV1 flysim-token", "", "Bearer flysim-token-deploy-web", "Bearer flysim-token-deploy-"} {
		f.Add(s)
	}
	cfg := &Config{Token: DefaultToken, Apps: []*AppConfig{{Name: "web"}}, Platform: Platform{DeployTokens: true}}
	a := &apiServer{s: &Sim{cfg: cfg}}
	auth := func(h string) (string, bool) {
		r := &http.Request{Header: http.Header{}}
		r.Header.Set("Authorization", h)
		return a.authorized(r)
	}
	if _, ok := auth("Bearer " + DefaultToken); !ok {
		f.Fatal("the token's own forms")
	}
	if _, ok := auth("FlyV1 " + DefaultToken); !ok {
		f.Fatal("the token's own forms")
	}
	if scope, ok := auth("Bearer " + cfg.deployToken("web")); !ok || scope != "web" {
		f.Fatalf("the deploy token of web: scope %q, %v", scope, ok)
	}
	if _, ok := auth(""); ok {
		f.Fatal("no token passed")
	}
	f.Fuzz(func(t *testing.T, h string) {
		scope, ok := auth(h)
		if !ok {
			return
		}
		want := DefaultToken
		if scope != "" {
			want = cfg.deployToken(scope)
		}
		lower := strings.ToLower(h)
		if !strings.HasPrefix(lower, "bearer ") && !strings.HasPrefix(lower, "flyv1 ") || !strings.Contains(h, want) {
			t.Fatalf("authorized %q (scope %q)", h, scope)
		}
	})
}
