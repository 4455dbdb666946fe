package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/wire"
)

const fleetKey = "fleet-test-admin-key-0123456789abcdef"

// purrctl fleet against a devstack of real relays: the tables, --json,
// drain and undrain, close, watch, and its usage mistakes.
func TestFleetCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{
		AdminKey: fleetKey, Logger: slog.New(slog.DiscardHandler), HeartbeatInterval: 200 * time.Millisecond,
		AllocateRate: limit.Rate{Every: -1}, JoinRate: limit.Rate{Every: -1}, MaxRoomsPerSource: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fleet := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(append([]string{"purrctl", "fleet"}, append(args, "--balancer", st.Balancer.URL(), "--admin-key", fleetKey)...), &out, &errb)
		return code, out.String(), errb.String()
	}

	code, out, _ := fleet("status")
	if code != 0 || !strings.Contains(out, "2 relay(s) (0 draining, 0 retiring)") || !strings.Contains(out, "eu ") || !strings.Contains(out, "us ") {
		t.Fatalf("status: %d\n%s", code, out)
	}
	code, out, _ = fleet("instances", "--json")
	var insts wire.InstancesResponse
	if code != 0 || json.Unmarshal([]byte(out), &insts) != nil || len(insts.Instances) != 2 {
		t.Fatalf("instances --json: %d %q", code, out)
	}
	boot := insts.Instances[0].BootID
	if code, out, _ = fleet("drain", boot); code != 0 || !strings.Contains(out, "drained relay "+boot) || !strings.Contains(out, "now draining") {
		t.Fatalf("drain: %d %q", code, out)
	}
	if code, out, _ = fleet("instances"); code != 0 || !strings.Contains(out, boot) || !strings.Contains(out, "draining") {
		t.Fatalf("instances after the drain: %d\n%s", code, out)
	}
	if code, out, _ = fleet("undrain", boot); code != 0 || !strings.Contains(out, "now live") {
		t.Fatalf("undrain: %d %q", code, out)
	}

	// A room to list, watch and close.
	admin := client.NewAdmin(st.Balancer.URL(), fleetKey)
	watchOut := &testutil.Buffer{}
	watched := make(chan int, 1)
	go func() {
		watched <- run([]string{"purrctl", "fleet", "watch", "--count", "2", "--for", "20s", "--balancer", st.Balancer.URL(), "--admin-key", fleetKey}, watchOut, &bytes.Buffer{})
	}()
	// The stream's first event is the fleet as it is: subscribed.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(watchOut.String(), " stats "); {
		if time.Now().After(deadline) {
			t.Fatalf("watch printed no first stats event: %q", watchOut.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the command's output
	}
	if _, err := admin.Reserve(ctx, wire.ReserveRequest{Name: "fleet-room", AllocationID: "a1"}); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = fleet("rooms", "--phase", "waiting"); code != 0 || !strings.Contains(out, "fleet-room") || !strings.Contains(out, "1 of 1 room(s)") {
		t.Fatalf("rooms: %d\n%s", code, out)
	}
	if code := <-watched; code != 0 || !strings.Contains(watchOut.String(), "stats") || !strings.Contains(watchOut.String(), "room.create") {
		t.Errorf("watch: %d\n%s", code, watchOut.String())
	}
	if code, out, _ = fleet("close", "fleet-room"); code != 0 || !strings.Contains(out, "closed room fleet-room") {
		t.Fatalf("close: %d %q", code, out)
	}
	if code, out, _ = fleet("close", "fleet-room"); code != 0 || !strings.Contains(out, "already closed") {
		t.Fatalf("close again: %d %q", code, out)
	}

	// Usage mistakes: exit 2, one line; a refused key: exit 1, never shown.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"drain"}, "needs exactly one ID"},
		{[]string{"status", "extra"}, "takes no arguments"},
		{[]string{"nope"}, `unknown fleet command "nope"`},
		{[]string{"rooms", "--limit", "x"}, "invalid value"},
		{[]string{"rooms", "--limit", "-5"}, "--limit must not be negative"},
		{[]string{"watch", "--count", "-1"}, "must not be negative"},
		{[]string{"rooms", "--phase", "playing"}, `--phase must be waiting, active or vacant, got "playing"`},
	} {
		code, out, errs := fleet(tc.args...)
		if code != exitUsage || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", tc.args, code, errs, out)
		}
	}
	var errb bytes.Buffer
	if code := run([]string{"purrctl", "fleet", "status", "--balancer", st.Balancer.URL()}, &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), "set ADMIN_KEY") {
		t.Errorf("no key: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"purrctl", "fleet", "status", "--balancer", st.Balancer.URL(), "--admin-key", "wrong-key-wrong-key-1"}, &bytes.Buffer{}, &errb); code != exitFailure ||
		!strings.Contains(errb.String(), "unauthorized") || strings.Contains(errb.String(), "wrong-key") {
		t.Errorf("wrong key: %d %q", code, errb.String())
	}
}
