package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// PurrNet's retry loop: up to 10 tries, 1 s apart.
const (
	DefaultTries      = 10
	DefaultRetryDelay = time.Second
)

// Retry repeats a call the way PurrNet's PurrTransportUtils.Retry does: up to
// Tries attempts, Delay apart, returning the first success or the last error.
// The zero value is PurrNet's policy. A Retry is a value; it holds no state.
type Retry struct {
	// Tries is the number of attempts; zero means DefaultTries.
	Tries int
	// Delay is the pause between attempts; zero means DefaultRetryDelay.
	Delay time.Duration
	// Sleep waits d or until ctx ends (tests inject a fake). nil means a real
	// timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Permanent reports whether err ends the retries at once. nil retries
	// every error, as PurrNet does; IsPermanent stops on an answer the
	// balancer marked non-retryable (for example room_name_taken).
	Permanent func(err error) bool
}

// IsPermanent reports whether err carries a *wire.Error that is not
// retryable. Transport errors and timeouts are not permanent.
func IsPermanent(err error) bool {
	var e *wire.Error
	return errors.As(err, &e) && !e.Retryable
}

// Do calls fn until it succeeds, a permanent error occurs, the tries run out
// or ctx ends.
func (r Retry) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	tries, delay, sleep := r.Tries, r.Delay, r.Sleep
	if tries <= 0 {
		tries = DefaultTries
	}
	if delay <= 0 {
		delay = DefaultRetryDelay
	}
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, nil, d) }
	}
	var last error
	for i := 0; i < tries; i++ {
		if i > 0 {
			if err := sleep(ctx, delay); err != nil {
				return fmt.Errorf("gave up after %d tries: %w (last error: %w)", i, err, last)
			}
		}
		if err := ctx.Err(); err != nil {
			if last == nil {
				return err
			}
			return fmt.Errorf("gave up after %d tries: %w (last error: %w)", i, err, last)
		}
		last = fn(ctx)
		if last == nil {
			return nil
		}
		if r.Permanent != nil && r.Permanent(last) {
			return last
		}
	}
	return last
}

// AllocateRetry allocates like PurrNet's Alloc: one fresh allocation id,
// reused on every try of r, so a lost answer is replayed, not duplicated.
// It returns the capability and the allocation id it used.
func (b *Balancer) AllocateRetry(ctx context.Context, region, name string, r Retry) (wire.Capability, string, error) {
	id := NewAllocationID()
	var c wire.Capability
	err := r.Do(ctx, func(ctx context.Context) error {
		var err error
		c, err = b.Allocate(ctx, region, name, id)
		return err
	})
	if err != nil {
		return wire.Capability{}, id, err
	}
	return c, id, nil
}

// JoinRetry joins like PurrNet's Join: up to r.Tries tries.
func (b *Balancer) JoinRetry(ctx context.Context, name string, r Retry) (wire.Capability, error) {
	var c wire.Capability
	err := r.Do(ctx, func(ctx context.Context) error {
		var err error
		c, err = b.Join(ctx, name)
		return err
	})
	return c, err
}

// NewAllocationID returns a fresh allocation id in the shape PurrNet sends:
// a random (version 4) GUID as 32 lower-case hex digits, .NET's "N" format.
func NewAllocationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}
