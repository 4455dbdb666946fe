package bench

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/purrfly/purrfly/client"
)

// watchEvents opens the balancer's GET /v1/events stream and reads it, as
// an operator's dashboard does, until the returned stop is called; stop
// ends the stream and returns how many events it read (the balancer mode's
// Options.WatchEvents: the event hub's cost while allocations run).
func watchEvents(ctx context.Context, a *client.Admin) (stop func() int64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	es, err := a.Events(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("failed to open the event stream: %w", err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := es.Next()
			if err != nil {
				return // stopped, or the balancer ended the stream
			}
			if f.Event.Type != "" {
				n.Add(1)
			}
		}
	}()
	return func() int64 {
		cancel()
		_ = es.Close()
		<-done
		return n.Load()
	}, nil
}
