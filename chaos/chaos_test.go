package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purrfly/purrfly/flysim"
)

// TestChaosSoak is the suite's short soak: fly/chaos.toml on a loopback
// range of its own, a fixed seed, every fault kind at least once, and no
// invariant broken; goroutines and fds of every process back to baseline.
func TestChaosSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a one-minute soak")
	}
	cfg := isolated(t)
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Config:   cfg,
		Sim:      flysim.Options{LogDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Executable: purrctl, CheckRetry: 50 * time.Millisecond},
		Duration: 50 * time.Second,
		Seed:     7,
		Rooms:    5,
		Players:  2,
		// Short rooms and gaps: every kind (seven) fits in the minute.
		RoomLifetime: 12 * time.Second,
		FaultGap:     time.Second,
		Progress:     &progress,
	})
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, progress.String())
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	t.Logf("progress:\n%s\nreport:\n%s", progress.String(), table.String())
	if n := rep.Total(); n > 0 {
		t.Errorf("%d invariant violations", n)
	}
	for _, k := range FaultKinds {
		if rep.Faults[k] == 0 {
			t.Errorf("fault %s never injected", k)
		}
	}
	if rep.Counts["rooms_played"] < 5 || rep.Counts["messages_echoed"] == 0 || rep.Counts["audits_passed"] == 0 {
		t.Errorf("too little play: %v", rep.Counts)
	}
	if len(rep.Baseline) == 0 || rep.LogFiles == 0 {
		t.Errorf("no baseline rows (%d) or no logs scanned (%d files)", len(rep.Baseline), rep.LogFiles)
	}
}

// TestSecretsScan: the log scan finds the configured values and the
// generic credential shapes, and names no secret in its report.
func TestSecretsScan(t *testing.T) {
	dir := t.TempDir()
	logs := "ok line\n{\"msg\":\"x\",\"secret\":\"hunter22\"}\nAuthorization: Bearer abc\nplain s3cr3t-value here\nfine\n"
	if err := os.WriteFile(filepath.Join(dir, "app-1.log"), []byte(logs), 0o644); err != nil {
		t.Fatal(err)
	}
	led := newLedger(func(string) {})
	files, lines, err := scanSecrets(dir, []string{"s3cr3t-value"}, led)
	if err != nil || files != 1 || lines != 5 {
		t.Fatalf("scan: %d files, %d lines, %v", files, lines, err)
	}
	if led.violations[InvSecretInLog] != 3 {
		t.Fatalf("violations = %d, want 3 (%v)", led.violations[InvSecretInLog], led.details)
	}
	for _, v := range led.details {
		if strings.Contains(v.Detail, "s3cr3t-value") {
			t.Fatalf("the report repeats the secret: %s", v.Detail)
		}
	}
}

// isolated loads fly/chaos.toml and moves every listen address to a
// loopback range of its own (127.1xx.y.0/24 is flysim's, 127.2xx
// multimachine's: this one uses 127.5x), so the suite can run beside a
// `purrctl chaos` or `purrctl sim`.
func isolated(t *testing.T) *flysim.Config {
	t.Helper()
	cfg, err := flysim.LoadConfig("../fly/chaos.toml")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("127.%d.%d", 50+rand.IntN(50), rand.IntN(250))
	cfg.MachinesAPI, cfg.DNS, cfg.MachineIPBase = base+".1:0", base+".1:0", base+".2"
	move := func(addr string) string {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		return net.JoinHostPort(base+".1", port)
	}
	for _, l := range cfg.Links {
		l.Listen = move(l.Listen)
	}
	for _, a := range cfg.Apps {
		a.Proxy = move(a.Proxy)
		if _, ok := a.Env["HOST_DOMAIN"]; ok {
			a.Env["HOST_DOMAIN"] = base + ".1"
		}
		for _, u := range a.UDP {
			u.Port = 20000 + rand.IntN(20000)
			a.Env["HOST_UDP_PORT_V2"] = strconv.Itoa(u.Port)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
