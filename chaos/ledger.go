package chaos

import (
	"fmt"
	"sync"
	"time"
)

// maxViolationDetails bounds the violations kept with their details (every
// one is counted).
const maxViolationDetails = 100

// Invariant names, the keys of Report.Violations.
const (
	InvSplitBrain   = "room_on_two_machines"  // one room hosted by two machines at once
	InvRoomLost     = "room_lost_with_host"   // a room whose host is connected stopped being served or joinable
	InvSocketOpen   = "dead_room_socket_open" // a player socket of a dead room outlived its bound
	InvJoinUnserved = "join_to_unserved_room" // /join handed out a room nobody served, past its bound
	InvLeak         = "goroutine_or_fd_leak"  // goroutines or fds above baseline after the storm
	InvSecretInLog  = "secret_in_log"         // a log line that looks like a secret
	InvTraffic      = "traffic_corrupted"     // an echo that was not what was sent
	// host_down (hostdown.go): an allocation on PurrNet's schedule failed,
	// or the balancer machines did not settle on the primary.
	InvAllocSchedule   = "allocation_failed_on_purrnet_schedule"
	InvBalancerSettled = "balancers_not_settled"
)

// Invariants lists every invariant in report order.
var Invariants = []string{InvSplitBrain, InvRoomLost, InvSocketOpen, InvJoinUnserved, InvLeak, InvSecretInLog, InvTraffic, InvAllocSchedule, InvBalancerSettled}

// Violation is one broken invariant.
type Violation struct {
	Invariant string    `json:"invariant"`
	Room      string    `json:"room,omitempty"`
	Detail    string    `json:"detail"`
	At        time.Time `json:"at"`
}

// ledger collects the soak's counts and violations; every goroutine of the
// soak writes to it. All fields are guarded by mu.
type ledger struct {
	mu         sync.Mutex
	violations map[string]int
	details    []Violation
	counts     map[string]int64         // rooms_played, messages, ...
	maxes      map[string]time.Duration // worst observed latency per measure
	faults     map[string]int
	log        func(string) // progress lines; static
}

func newLedger(log func(string)) *ledger {
	return &ledger{violations: map[string]int{}, counts: map[string]int64{}, maxes: map[string]time.Duration{},
		faults: map[string]int{}, log: log}
}

func (l *ledger) violate(inv, room, format string, args ...any) {
	v := Violation{Invariant: inv, Room: room, Detail: fmt.Sprintf(format, args...), At: time.Now()}
	l.mu.Lock()
	l.violations[inv]++
	if len(l.details) < maxViolationDetails {
		l.details = append(l.details, v)
	}
	l.mu.Unlock()
	l.log(fmt.Sprintf("VIOLATION %s %s: %s", inv, room, v.Detail))
}

func (l *ledger) add(key string, n int64) {
	l.mu.Lock()
	l.counts[key] += n
	l.mu.Unlock()
}

func (l *ledger) observe(key string, d time.Duration) {
	l.mu.Lock()
	if d > l.maxes[key] {
		l.maxes[key] = d
	}
	l.mu.Unlock()
}

func (l *ledger) fault(kind string) {
	l.mu.Lock()
	l.faults[kind]++
	l.mu.Unlock()
}

// faultCount is how many faults were injected so far.
func (l *ledger) faultCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.faults {
		n += c
	}
	return n
}
