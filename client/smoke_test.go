package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

var smokeSteps = []string{StepAllocate, StepRegion, StepHostConnect, StepJoin, StepClientJoin,
	StepConnectSeen, StepClientToHost, StepHostToClient, StepClientLeave, StepHostClose}

func TestSmokePasses(t *testing.T) {
	relay := newFakeRelay(t, nil)
	bal := newFakeBalancer(t, relay, "eu", nil)
	ctx := testCtx(t, 20*time.Second)
	var mu sync.Mutex
	var logs []string
	rep, err := Smoke(ctx, SmokeOptions{Balancer: bal.srv.URL, Region: "eu", StrictRegion: true,
		Logf: func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }})
	if err != nil {
		t.Fatalf("Smoke: %v", err)
	}
	if rep.RelayRegion != "eu" || rep.Region != "eu" || rep.ClientID == 0 || !strings.HasPrefix(rep.Room, "purrfly-smoke-") ||
		rep.RelayURL != relay.wsURL() || rep.Elapsed <= 0 {
		t.Fatalf("report = %+v", rep)
	}
	if len(rep.Steps) != len(smokeSteps) {
		t.Fatalf("steps = %+v", rep.Steps)
	}
	for i, s := range rep.Steps {
		if s.Name != smokeSteps[i] {
			t.Fatalf("step %d = %s, want %s", i, s.Name, smokeSteps[i])
		}
	}
	// The allocation was a POST with a fresh 32-hex allocation id; every
	// request asked for no caching.
	var sawAlloc bool
	for _, r := range bal.requests() {
		if r.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s %s without Cache-Control: no-cache", r.Method, r.Path)
		}
		if r.Path == "/allocate_ws" {
			sawAlloc = true
			if r.Method != http.MethodPost || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(r.Header.Get("allocation_id")) ||
				r.Header.Get("region") != "eu" || r.Header.Get("name") != rep.Room || r.ContentLength != 0 {
				t.Errorf("allocation request = %+v", r)
			}
		}
	}
	if !sawAlloc {
		t.Fatal("no allocation request")
	}
	// Both WebSockets carried the session hint.
	_, reqs, _, _ := relay.snapshot()
	if len(reqs) != 2 {
		t.Fatalf("%d upgrade requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.URL.Query().Get("s") != wire.SessionID(rep.Room).Hint() {
			t.Errorf("upgrade %s lacks the session hint", r.URL)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logs {
		if strings.Contains(l, "secret") {
			t.Errorf("log line shows a credential: %q", l)
		}
	}
	if len(logs) == 0 || !strings.HasPrefix(logs[len(logs)-1], "smoke passed") {
		t.Errorf("logs = %q", logs)
	}
}

// TestSmokeFailures: each broken behaviour fails the step it belongs to,
// quickly, with a message that names the step and shows no credential.
func TestSmokeFailures(t *testing.T) {
	const stepTimeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name     string
		knobs    func(*fakeRelay)
		override map[string]http.HandlerFunc
		region   string
		step     string
		is       error
		msg      string
	}{
		{name: "no relays", override: map[string]http.HandlerFunc{"/allocate_ws": func(w http.ResponseWriter, r *http.Request) {
			wire.WriteError(w, wire.ErrNoRelays)
		}}, step: StepAllocate, is: wire.ErrNoRelays},
		{name: "wrong region", region: "us", step: StepRegion, msg: `want region "us"`},
		{name: "join fails", override: map[string]http.HandlerFunc{"/join": func(w http.ResponseWriter, r *http.Request) {
			wire.WriteError(w, wire.ErrRoomNotFound)
		}}, step: StepJoin, is: wire.ErrRoomNotFound},
		{name: "client refused", knobs: func(r *fakeRelay) { r.rejectClients = true }, step: StepClientJoin, is: ErrAuthFailed},
		{name: "data dropped", knobs: func(r *fakeRelay) { r.dropData = true }, step: StepClientToHost, is: context.DeadlineExceeded},
		{name: "wrong sender", knobs: func(r *fakeRelay) { r.senderOffset = 7 }, step: StepClientToHost, msg: "but client connected as"},
		{name: "text to client", knobs: func(r *fakeRelay) { r.textToClients = true }, step: StepHostToClient, is: ErrTextFrame},
		{name: "no disconnect notice", knobs: func(r *fakeRelay) { r.noDisconnect = true }, step: StepClientLeave, is: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relay := newFakeRelay(t, tc.knobs)
			bal := newFakeBalancer(t, relay, "eu", tc.override)
			region := tc.region
			if region == "" {
				region = "eu"
			}
			ctx := testCtx(t, 10*time.Second)
			start := time.Now()
			_, err := Smoke(ctx, SmokeOptions{Balancer: bal.srv.URL, Region: region, StrictRegion: true, Timeout: stepTimeout})
			var se *SmokeError
			if !errors.As(err, &se) || se.Step != tc.step {
				t.Fatalf("err = %v, want a failure of step %s", err, tc.step)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want it to wrap %v", err, tc.is)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want it to say %q", err, tc.msg)
			}
			if !strings.Contains(err.Error(), "step "+tc.step+" failed") {
				t.Fatalf("message does not name the step: %v", err)
			}
			if regexp.MustCompile(`(host|client)-[0-9a-f]{16}`).MatchString(err.Error()) {
				t.Fatalf("message shows a credential: %v", err)
			}
			if errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timed out after 300ms") {
				t.Fatalf("timeout not stated plainly: %v", err)
			}
			t.Logf("message: %v", err)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("failure took %s with a %s step timeout", d, stepTimeout)
			}
		})
	}
	t.Run("no balancer", func(t *testing.T) {
		_, err := Smoke(context.Background(), SmokeOptions{})
		var se *SmokeError
		if !errors.As(err, &se) || se.Step != StepAllocate {
			t.Fatalf("err = %v", err)
		}
	})
}
