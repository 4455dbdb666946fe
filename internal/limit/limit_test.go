package limit

import (
	"strconv"
	"testing"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
)

// A source gets its burst at once, then one token per interval; others
// are not affected; Retry-After says when the next token comes.
func TestBucketsRateAndBurst(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := NewBuckets(PerMinute(60, 3), clk, 0)
	for i := range 3 {
		if ok, _ := b.Allow("a"); !ok {
			t.Fatalf("burst token %d refused", i)
		}
	}
	ok, wait := b.Allow("a")
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("past the burst: %v %v, want a refusal and a wait up to 1 s", ok, wait)
	}
	if ok, _ := b.Allow("b"); !ok {
		t.Fatal("another source was refused")
	}
	clk.Advance(time.Second)
	if ok, _ := b.Allow("a"); !ok {
		t.Fatal("no token after the interval")
	}
}

// However many sources come, the table stays bounded: past MaxKeys new
// sources share one overflow bucket, so a flood is still limited.
func TestBucketsBoundedUnderChurn(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := NewBuckets(PerMinute(60, 2), clk, 100)
	allowed := 0
	for i := range 10_000 {
		if ok, _ := b.Allow("src-" + strconv.Itoa(i)); ok {
			allowed++
		}
	}
	if n := len(b.m); n > 100 {
		t.Fatalf("%d sources tracked, want at most 100", n)
	}
	if allowed > 100*2+2 {
		t.Fatalf("%d of 10,000 fresh sources allowed at once, want the overflow bucket to limit them", allowed)
	}
	// Idle sources refill and are forgotten: room for new ones again.
	clk.Advance(time.Minute)
	if ok, _ := b.Allow("late"); !ok {
		t.Fatal("a new source after the flood was refused")
	}
}

func TestCountsBounds(t *testing.T) {
	c := NewCounts(2, 3)
	first, second, third := c.Acquire("a"), c.Acquire("a"), c.Acquire("a")
	if !first || !second || third {
		t.Fatal("per-source bound")
	}
	if !c.Acquire("b") || c.Acquire("c") {
		t.Fatal("total bound")
	}
	c.Release("a")
	if !c.Acquire("c") {
		t.Fatal("a released slot was not reusable")
	}
	c.Release("a")
	c.Release("b")
	c.Release("c")
	if len(c.m) != 0 || c.sum != 0 {
		t.Fatalf("left %v %d", c.m, c.sum)
	}
}
