package flyaffinity

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Rule: with no set known, Owner's ErrNoMachines carries why: the caller's
// context cause when the caller gave up, ErrClosed when the resolver is
// closed.
func TestOwnerWithoutSetSaysWhy(t *testing.T) {
	f := startDNS(t, "aaa sea,bbb ams")
	f.setDrop(true) // the lookup never ends by itself
	cfg := testConfig(f, "aaa")
	cfg.LookupTimeout = 30 * time.Second
	r := newTestResolver(t, cfg)

	gaveUp := errors.New("the caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(gaveUp)
	if _, err := r.Owner(ctx, "room-1"); !errors.Is(err, ErrNoMachines) || !errors.Is(err, gaveUp) {
		t.Fatalf("Owner with a cancelled context: %v, want ErrNoMachines wrapping the cause", err)
	}

	r.Close()
	live, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if _, err := r.Owner(live, "room-1"); !errors.Is(err, ErrNoMachines) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Owner after Close: %v, want ErrNoMachines wrapping ErrClosed", err)
	}
}
