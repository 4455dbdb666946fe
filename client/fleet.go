package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// Admin calls a balancer's /v1 admin API with an admin key (ADMIN_KEY),
// sent as "Authorization: Bearer <key>". Set the fields before the first
// call and never change them after; then an Admin is safe for concurrent
// use. purrctl and the tests share it.
type Admin struct {
	// BaseURL is the balancer's base URL.
	BaseURL string
	// Key is the admin key.
	Key string
	// HTTP is the client requests go through; nil means http.DefaultClient.
	HTTP *http.Client
	// Timeout bounds each request (not an event stream); zero means
	// DefaultRequestTimeout.
	Timeout time.Duration
}

// NewAdmin returns an Admin for baseURL and key.
func NewAdmin(baseURL, key string) *Admin { return &Admin{BaseURL: baseURL, Key: key} }

// MaxAdminResponseSize bounds an admin API answer the client reads: a
// page of the most rooms the balancer answers (10,000, a few hundred bytes
// each) fits.
const MaxAdminResponseSize = 8 << 20

// RoomFilter narrows GET /v1/rooms; zero fields do not filter.
type RoomFilter struct {
	Region   string
	Instance string   // boot id or machine id
	Labels   []string // "key:value", all must match
	Phase    string   // wire.RoomWaiting, RoomActive or RoomVacant
	Limit    int      // 0: the server's default (1000)
	After    string   // the Next of the previous page
}

func (f RoomFilter) query() string {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("region", f.Region)
	set("instance", f.Instance)
	set("phase", f.Phase)
	set("after", f.After)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	for _, l := range f.Labels {
		q.Add("label", l)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Stats is GET /v1/stats.
func (a *Admin) Stats(ctx context.Context) (wire.Stats, error) {
	var out wire.Stats
	_, _, err := a.call(ctx, http.MethodGet, wire.PathStats, nil, "", &out)
	return out, wrap("read the fleet's stats", err)
}

// Instances is GET /v1/instances.
func (a *Admin) Instances(ctx context.Context) ([]wire.Instance, error) {
	var out wire.InstancesResponse
	_, _, err := a.call(ctx, http.MethodGet, wire.PathInstances, nil, "", &out)
	return out.Instances, wrap("list instances", err)
}

// Instance is GET /v1/instances/{id} (boot id or machine id).
func (a *Admin) Instance(ctx context.Context, id string) (wire.Instance, error) {
	var out wire.Instance
	_, _, err := a.call(ctx, http.MethodGet, fmt.Sprintf(wire.PathInstanceFmt, url.PathEscape(id)), nil, "", &out)
	return out, wrap("read instance "+id, err)
}

// InstanceRooms is GET /v1/instances/{id}/rooms (Limit and After of f
// apply).
func (a *Admin) InstanceRooms(ctx context.Context, id string, f RoomFilter) (wire.RoomsResponse, error) {
	var out wire.RoomsResponse
	p := fmt.Sprintf(wire.PathInstanceRoomsFmt, url.PathEscape(id)) + RoomFilter{Limit: f.Limit, After: f.After}.query()
	_, _, err := a.call(ctx, http.MethodGet, p, nil, "", &out)
	return out, wrap("list the rooms of "+id, err)
}

// Drain is POST /v1/instances/{id}/drain: no new room goes there.
func (a *Admin) Drain(ctx context.Context, id string) (wire.Instance, error) {
	var out wire.Instance
	_, _, err := a.call(ctx, http.MethodPost, fmt.Sprintf(wire.PathDrainFmt, url.PathEscape(id)), nil, "", &out)
	return out, wrap("drain "+id, err)
}

// Undrain is POST /v1/instances/{id}/undrain.
func (a *Admin) Undrain(ctx context.Context, id string) (wire.Instance, error) {
	var out wire.Instance
	_, _, err := a.call(ctx, http.MethodPost, fmt.Sprintf(wire.PathUndrainFmt, url.PathEscape(id)), nil, "", &out)
	return out, wrap("undrain "+id, err)
}

// Rooms is GET /v1/rooms with f's filters.
func (a *Admin) Rooms(ctx context.Context, f RoomFilter) (wire.RoomsResponse, error) {
	var out wire.RoomsResponse
	_, _, err := a.call(ctx, http.MethodGet, wire.PathRooms+f.query(), nil, "", &out)
	return out, wrap("list rooms", err)
}

// Room is GET /v1/rooms/{name}.
func (a *Admin) Room(ctx context.Context, name string) (wire.Room, error) {
	var out wire.Room
	_, _, err := a.call(ctx, http.MethodGet, fmt.Sprintf(wire.PathRoomFmt, url.PathEscape(name)), nil, "", &out)
	return out, wrap("read room "+name, err)
}

// CloseRoom is DELETE /v1/rooms/{name}: every socket closed at the
// relay, the name released. Idempotent (Closed false on a repeat).
func (a *Admin) CloseRoom(ctx context.Context, name string) (wire.RoomClosed, error) {
	var out wire.RoomClosed
	_, _, err := a.call(ctx, http.MethodDelete, fmt.Sprintf(wire.PathRoomFmt, url.PathEscape(name)), nil, "", &out)
	return out, wrap("close room "+name, err)
}

// Reserve is POST /v1/rooms: reserve a named room for a matchmaker. The
// same name and allocation id again answers the same reservation.
func (a *Admin) Reserve(ctx context.Context, req wire.ReserveRequest) (wire.Reservation, error) {
	var out wire.Reservation
	body, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("failed to encode the reservation: %w", err)
	}
	_, _, err = a.call(ctx, http.MethodPost, wire.PathRooms, body, "", &out)
	return out, wrap("reserve room "+req.Name, err)
}

// GetTagged is a conditional GET of a list route (wire.PathStats,
// PathInstances, PathRooms...): with etag set, an unchanged answer is
// notModified with out untouched. It returns the answer's ETag.
func (a *Admin) GetTagged(ctx context.Context, path, etag string, out any) (newETag string, notModified bool, err error) {
	newETag, notModified, err = a.call(ctx, http.MethodGet, path, nil, etag, out)
	return newETag, notModified, wrap("read "+path, err)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("failed to %s: %w", what, err)
}

func (a *Admin) url(path string) string { return strings.TrimRight(a.BaseURL, "/") + path }

// client is a.HTTP (nil: http.DefaultClient), answering redirects rather
// than following them with the key (wire.WithoutRedirects).
func (a *Admin) client() *http.Client { return wire.WithoutRedirects(a.HTTP) }

// call makes one request; a non-2xx answer is its *wire.Error.
func (a *Admin) call(ctx context.Context, method, path string, body []byte, etag string, out any) (string, bool, error) {
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.url(path), rd)
	if err != nil {
		return "", false, fmt.Errorf("failed to build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		return "", false, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAdminResponseSize+1))
	if err != nil {
		return "", false, fmt.Errorf("failed to read answer of %s %s: %w", method, req.URL.Path, err)
	}
	if len(b) > MaxAdminResponseSize {
		return "", false, fmt.Errorf("%s %s: answer larger than %d MiB (ask for smaller pages: RoomFilter.Limit)", method, req.URL.Path, MaxAdminResponseSize>>20)
	}
	tag := resp.Header.Get("ETag")
	if resp.StatusCode == http.StatusNotModified {
		return tag, true, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", false, wire.DecodeError(resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return "", false, fmt.Errorf("failed to decode answer of %s %s: %w", method, req.URL.Path, err)
		}
	}
	return tag, false, nil
}
