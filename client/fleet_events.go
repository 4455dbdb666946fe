package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// maxEventLine bounds one line of an event stream.
const maxEventLine = 1 << 20

// ErrEventTooLarge is returned by EventStream.Next for a line over 1 MiB.
var ErrEventTooLarge = errors.New("event stream line larger than 1 MiB")

// ErrEventStreamIdle is returned by EventStream.Next once nothing, not
// even the balancer's idle ping, arrived within the stream's idle timeout
// (WithIdle): the connection is likely half-open, and the stream closed.
var ErrEventStreamIdle = errors.New("event stream idle: nothing arrived, not even a ping, within the idle timeout")

// Frame is one item of an event stream: an event, or a comment (": ping").
type Frame struct {
	Event   wire.Event
	Comment string // set for a comment line, without the leading ':'
}

// EventStream reads GET /v1/events. Next is not safe for concurrent use;
// Close may be called at any time.
type EventStream struct {
	body io.ReadCloser
	r    *bufio.Reader

	// The idle deadline (WithIdle): set before the first Next, then reset
	// by Next's reads; idled is set by the timer, which closes body.
	idle    clock.Timer
	idleFor time.Duration
	idled   atomic.Bool
}

// Events opens GET /v1/events (no timeout of its own: ctx ends it).
func (a *Admin) Events(ctx context.Context) (*EventStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url(wire.PathEvents), nil)
	if err != nil {
		return nil, fmt.Errorf("failed to build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to open the event stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize))
		return nil, fmt.Errorf("failed to open the event stream: %w", wire.DecodeError(resp.StatusCode, b))
	}
	return NewEventStream(resp.Body), nil
}

// NewEventStream reads frames from an event stream body.
func NewEventStream(body io.ReadCloser) *EventStream {
	return &EventStream{body: body, r: bufio.NewReaderSize(body, 64<<10)}
}

// WithIdle closes the stream when no line (an event or a ping comment)
// arrives for d on clk (nil: the wall clock); Next then returns
// ErrEventStreamIdle. Call it before the first Next. The balancer pings an
// idle stream every 15 s by default, so d should be a few times that.
func (s *EventStream) WithIdle(clk clock.Clock, d time.Duration) *EventStream {
	s.idleFor = d
	s.idle = clock.OrReal(clk).AfterFunc(d, func() {
		s.idled.Store(true)
		_ = s.body.Close()
	})
	return s
}

// Close ends the stream.
func (s *EventStream) Close() error {
	if s.idle != nil {
		s.idle.Stop()
	}
	return s.body.Close()
}

// Next returns the next frame: an event (its "data:" lines decoded as a
// wire.Event) or a comment. Fields other than data are ignored (the data
// carries the type and sequence too).
func (s *EventStream) Next() (Frame, error) {
	var data []byte
	for {
		line, err := s.line()
		if err != nil {
			return Frame{}, err
		}
		switch {
		case len(line) == 0:
			if data == nil {
				continue
			}
			var f Frame
			if err := json.Unmarshal(data, &f.Event); err != nil {
				return Frame{}, fmt.Errorf("failed to decode an event: %w", err)
			}
			return f, nil
		case line[0] == ':':
			if data == nil {
				return Frame{Comment: strings.TrimSpace(string(line[1:]))}, nil
			}
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) == "data" {
				if len(data)+len(value) > maxEventLine {
					return Frame{}, ErrEventTooLarge
				}
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
	}
}

// line reads one line without its end (\n or \r\n), at most maxEventLine.
func (s *EventStream) line() ([]byte, error) {
	var out []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > maxEventLine {
			return nil, ErrEventTooLarge
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if s.idled.Load() {
				return nil, ErrEventStreamIdle
			}
			return nil, err
		}
		if s.idle != nil {
			s.idle.Reset(s.idleFor)
		}
		out = bytes.TrimSuffix(out[:len(out)-1], []byte("\r"))
		return out, nil
	}
}
