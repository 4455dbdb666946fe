package balancer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/testbin"
	"github.com/purrfly/purrfly/wire"
)

// TestRoomsInABudget measures how many rooms a balancer holds within a
// memory budget, as a user would see it: `purrctl balancer` in its own
// process with GOMEMLIMIT set (PURRFLY_BALANCER_CAPACITY, e.g. 215MiB as
// fly/balancer.toml sets it), one relay that takes every room (answered
// here, holding nothing, with the real relay's 32-digit epochs and
// secrets), an operator's event stream open and read, and allocations
// from 8 workers (24-byte names, 32-digit allocation ids) until the
// balancer answers balancer_full. It reports the rooms held, the live heap
// and the process's peak RSS, and fails if that peak passes the VM the
// budget is for (GOMEMLIMIT is 84% of it on Fly: 215 MiB of 256 MB).
//
//	PURRFLY_BALANCER_CAPACITY=215MiB go test -run TestRoomsInABudget -v -timeout 20m ./balancer/
func TestRoomsInABudget(t *testing.T) {
	budget := os.Getenv("PURRFLY_BALANCER_CAPACITY")
	if budget == "" {
		t.Skip("set PURRFLY_BALANCER_CAPACITY (a GOMEMLIMIT such as 215MiB) to measure")
	}
	mib, err := strconv.Atoi(strings.TrimSuffix(budget, "MiB"))
	if err != nil || !strings.HasSuffix(budget, "MiB") {
		t.Fatalf("PURRFLY_BALANCER_CAPACITY=%q: want MiB, as 215MiB", budget)
	}
	vm := int64(mib) << 20 * 256 / 215 // the VM GOMEMLIMIT is 84% of (fly/balancer.toml: 215 MiB of 256)
	bin, err := testbin.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	relay := httptest.NewServer(capacityRelay("capacity-boot"))
	defer relay.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const key = "capacity-admin-key-0123456789abcdef"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "balancer")
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+budget, "SECRET="+testSecret, "HOST=127.0.0.1", "PORT="+strconv.Itoa(port),
		"ADMIN_KEY="+key, "ALLOCATE_RATE_PER_MINUTE=0", "JOIN_RATE_PER_MINUTE=0", "BALANCER_MAX_ROOMS_PER_SOURCE=0")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := hc.Get(base + wire.PathHealthz)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the balancer did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond) // the child's start, not a test's timing
	}
	info := wire.RelayInfo{BootID: "capacity-boot", Endpoint: relay.URL, Host: "relay.test", Region: "eu", Port: 6942, UDPPort: 7777, UDPPortV2: 7778}
	body, _ := json.Marshal(wire.RegisterRequest{Relay: info, HeartbeatSeconds: 3600})
	req, _ := http.NewRequest(http.MethodPost, base+wire.PathRegister, bytes.NewReader(body))
	req.Header.Set(wire.HeaderInternalSecret, testSecret)
	req.Header.Set(wire.HeaderInternalVersion, strconv.Itoa(wire.InternalProtocolVersion))
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("register: %v %v", resp, err)
	}

	// An operator's event stream, read to the end.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	sreq, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+wire.PathEvents, nil)
	sreq.Header.Set("Authorization", "Bearer "+key)
	stream, err := (&http.Client{Transport: tr}).Do(sreq) // no timeout: it streams until the end
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %v %v", stream, err)
	}
	var events atomic.Int64
	go func() {
		sc := bufio.NewScanner(stream.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: room.create") {
				events.Add(1)
			}
		}
	}()

	var made, refused atomic.Int64
	var failure atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; refused.Load() == 0 && failure.Load() == nil; i += 8 {
				if i >= 4_000_000 {
					failure.Store("4,000,000 rooms and none refused")
					return
				}
				req, _ := http.NewRequest(http.MethodPost, base+"/allocate_ws", nil)
				req.Header.Set(wire.HeaderName, fmt.Sprintf("lobby-%018d", i))
				req.Header.Set(wire.HeaderRegion, "eu")
				req.Header.Set(wire.HeaderAllocationID, hex32("alloc", i))
				resp, err := hc.Do(req)
				if err != nil {
					failure.Store(err.Error())
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch e := wire.DecodeError(resp.StatusCode, b); {
				case resp.StatusCode == http.StatusOK:
					made.Add(1)
				case errors.Is(e, wire.ErrBalancerFull):
					refused.Add(1)
				default:
					failure.Store(fmt.Sprintf("allocation %d: %d %s", i, resp.StatusCode, b))
				}
			}
		}()
	}
	wg.Wait()
	if f := failure.Load(); f != nil {
		t.Fatal(f)
	}
	took := time.Since(start)
	var stats wire.Stats
	sreq2, _ := http.NewRequest(http.MethodGet, base+wire.PathStats, nil)
	sreq2.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(sreq2)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || stats.Bounds == nil {
		t.Fatalf("stats: %v", err)
	}
	resp.Body.Close()
	rss, peak := procKB(t, cmd.Process.Pid, "VmRSS"), procKB(t, cmd.Process.Pid, "VmHWM")
	m := stats.Bounds.Memory
	t.Logf("GOMEMLIMIT=%s: %d rooms made in %v (%.0f a second), then balancer_full; the balancer lists %d rooms; "+
		"live heap %.1f MiB (refused from %.1f MiB); RSS %.1f MiB, peak %.1f MiB (%.0f bytes of peak RSS a room); %d room.create events read",
		budget, made.Load(), took.Round(time.Second), float64(made.Load())/took.Seconds(), stats.Rooms,
		float64(m.Heap)/(1<<20), float64(m.RefuseAt)/(1<<20), float64(rss)/1024, float64(peak)/1024,
		float64(peak*1024)/float64(made.Load()), events.Load())
	if !m.Refusing || m.BudgetFrom != "GOMEMLIMIT" {
		t.Fatalf("memory bounds %+v, want refusing under GOMEMLIMIT", m)
	}
	if peak*1024 > vm {
		t.Fatalf("peak RSS %.1f MiB, past the %d MiB VM the budget is for", float64(peak)/1024, vm>>20)
	}
}

// capacityRelay answers /ping as boot and takes every room, holding
// nothing: each answer is made from the room's name (the real relay's
// 32-digit epoch and secrets).
func capacityRelay(boot string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, wire.Ping{Role: "relay", BootID: boot, Region: "eu", InternalProtocol: wire.InternalProtocolVersion})
	})
	mux.HandleFunc(wire.PathRelayAllocate, func(w http.ResponseWriter, r *http.Request) {
		name, id := r.Header.Get(wire.HeaderName), r.Header.Get(wire.HeaderAllocationID)
		wire.WriteJSON(w, http.StatusOK, wire.RelayAllocation{
			Capability: wire.Capability{Host: "relay.test", Secret: hex32("host-"+name, 0), Port: 6942, UDPPort: 7777, UDPPortV2: 7778},
			Publication: wire.Publication{Name: name, Epoch: hex32("epoch-"+name, 0), Revision: 1,
				ClientSecret: hex32("client-"+name, 0), AllocationID: id},
			BootID: boot,
		})
	})
	return mux
}

// hex32 is 32 hex digits derived from s and i.
func hex32(s string, i int) string {
	h := sha256.Sum256([]byte(s + strconv.Itoa(i)))
	return hex.EncodeToString(h[:16])
}

// procKB reads a "kB" field of /proc/pid/status.
func procKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
