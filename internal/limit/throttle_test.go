package limit

import (
	"fmt"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// TestAuthThrottleBound: however many sources fail, the table holds at
// most its cap; the most recent sources stay throttled, the least recent
// are forgotten first.
func TestAuthThrottleBound(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	th := NewAuthThrottle(Rate{Every: time.Minute, Burst: 1}, clk, 64)
	for i := range 100_000 {
		th.Admit(fmt.Sprintf("198.51.%d.%d", i/256, i%256), false)
		if n := th.Len(); n > 64 {
			t.Fatalf("after %d sources the table holds %d, over its cap of 64", i+1, n)
		}
	}
	if th.Len() != 64 || th.lru.Len() != 64 {
		t.Fatalf("table holds %d (list %d), want 64", th.Len(), th.lru.Len())
	}
	if limited, _ := th.Admit(fmt.Sprintf("198.51.%d.%d", 99_999/256, 99_999%256), true); !limited {
		t.Fatal("the last failing source is not throttled")
	}
	if limited, _ := th.Admit("198.51.0.0", false); limited {
		t.Fatal("the first source (evicted) is still remembered")
	}
}

// TestAuthThrottleGuard: failures past the burst throttle the source, its
// right credential included, and the credential of a throttled source is
// not compared at all; another source is not affected, a right
// credential takes no token, and the clock refills the bucket.
func TestAuthThrottleGuard(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	th := NewAuthThrottle(DefaultSecretFailureRate, clk, 0)
	compared := 0
	guard := func(src string, right bool) (ok, throttled bool, wait time.Duration) {
		return th.Guard(src, func() bool { compared++; return right })
	}
	for range 5 {
		if ok, throttled, _ := guard("192.0.2.1", true); !ok || throttled {
			t.Fatal("a right credential refused")
		}
	}
	for i := range DefaultSecretFailureRate.Burst {
		if ok, throttled, _ := guard("192.0.2.1", false); ok || throttled {
			t.Fatalf("failure %d within the burst: ok %v throttled %v", i, ok, throttled)
		}
	}
	compared = 0
	ok, throttled, wait := guard("192.0.2.1", true)
	if ok || !throttled || wait <= 0 || wait > time.Second {
		t.Fatalf("past the burst, a right credential: ok %v throttled %v wait %v, want throttled within 1 s", ok, throttled, wait)
	}
	if compared != 0 {
		t.Fatalf("a throttled source's credential was compared %d times", compared)
	}
	if ok, throttled, _ := guard("192.0.2.2", true); !ok || throttled {
		t.Fatal("another source was throttled")
	}
	clk.Advance(time.Second)
	if ok, throttled, _ := guard("192.0.2.1", true); !ok || throttled {
		t.Fatal("a second later, a right credential refused")
	}
	if ok, throttled, _ := guard("192.0.2.1", false); ok || throttled {
		t.Fatal("the token that came back did not answer one failure")
	}
	if _, throttled, _ := guard("192.0.2.1", true); !throttled {
		t.Fatal("after spending it, not throttled again")
	}
}

// TestAuthThrottleOff: a rate without an interval throttles nothing and
// remembers nothing.
func TestAuthThrottleOff(t *testing.T) {
	th := NewAuthThrottle(Rate{Every: -1}, nil, 0)
	for range 100 {
		if _, throttled, _ := th.Guard("192.0.2.1", func() bool { return false }); throttled {
			t.Fatal("throttled with no limit")
		}
	}
	if th.Len() != 0 {
		t.Fatalf("remembers %d sources with no limit", th.Len())
	}
}
