package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/wire"
)

// watchEvents opens the balancer's GET /v1/events stream and reads it, as
// an operator's dashboard does, until the returned stop is called (the
// balancer mode's Options.WatchEvents: the event hub's cost while
// allocations run). stop ends the stream and returns how many room and
// instance events it read, or an error when the stream had ended before
// (the balancer closed it, as it does a stream that falls behind): the run
// would not have measured what it says. Calls after the first return what
// the first did.
func watchEvents(ctx context.Context, a *client.Admin) (stop func() (int64, error), err error) {
	ctx, cancel := context.WithCancel(ctx)
	es, err := a.Events(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("failed to open the event stream: %w", err)
	}
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		for {
			f, err := es.Next()
			if err != nil {
				done <- err
				return
			}
			if t := f.Event.Type; t != "" && t != wire.EventStats {
				n.Add(1)
			}
		}
	}()
	var once sync.Once
	var stopErr error
	return func() (int64, error) {
		once.Do(func() {
			select {
			case err := <-done: // ended before stop
				stopErr = fmt.Errorf("the event stream ended during the run: %w", err)
			default:
			}
			cancel()
			_ = es.Close()
			if stopErr == nil {
				<-done
			}
		})
		return n.Load(), stopErr
	}, nil
}
