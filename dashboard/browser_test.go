package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purrfly/purrfly/internal/browser"
)

// stubAPI is a /v1 surface with the shapes the balancer serves, enough to
// drive the page: one relay, rooms that can be added and closed, an event
// stream the test can push to.
type stubAPI struct {
	key string

	mu     sync.Mutex // guards the fields below
	rooms  []string
	status string
	calls  []string // "POST /v1/instances/b1/drain", ...
	events chan string
}

func (s *stubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.key || r.URL.Query().Has("key") {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"code":"unauthorized","error":"unauthorized","retryable":false}`)
		return
	}
	s.mu.Lock()
	if r.URL.Path == "/v1/rooms" && r.URL.Query().Get("region") == "bad!" {
		s.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"code":"bad_request","error":"query parameter region is too long or malformed","retryable":false}`)
		return
	}
	if r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/stuck") {
		s.calls = append(s.calls, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, `{"code":"relay_unreachable","error":"the room's relay did not answer","retryable":true}`)
		return
	}
	if r.Method != http.MethodGet {
		s.calls = append(s.calls, r.Method+" "+r.URL.Path)
		switch {
		case strings.HasSuffix(r.URL.Path, "/drain"):
			s.status = "draining"
		case strings.HasSuffix(r.URL.Path, "/undrain"):
			s.status = "live"
		case r.Method == http.MethodDelete:
			name := strings.TrimPrefix(r.URL.Path, "/v1/rooms/")
			for i, n := range s.rooms {
				if n == name {
					s.rooms = append(s.rooms[:i], s.rooms[i+1:]...)
					break
				}
			}
		}
	}
	var body any
	switch r.URL.Path {
	case "/v1/stats":
		body = map[string]any{"regions": 1, "relays": 2, "draining": map[bool]int{true: 1}[s.status == "draining"], "retiring": 1,
			"rooms": len(s.rooms), "players": 2 * len(s.rooms)}
	case "/v1/stats/history":
		now := time.Now().UTC()
		body = map[string]any{"intervalSeconds": 60, "samples": []map[string]any{
			{"at": now.Add(-30 * time.Minute).Format(time.RFC3339), "relays": 1, "rooms": 3, "players": 6},
			{"at": now.Add(-10 * time.Minute).Format(time.RFC3339), "relays": 1, "rooms": 5, "players": 9},
		}}
	case "/v1/instances":
		body = map[string]any{"instances": []map[string]any{
			{"bootId": "b1", "machineId": "m1", "region": "eu", "status": s.status, "rooms": len(s.rooms), "connections": 2 * len(s.rooms)},
			{"bootId": "b2", "machineId": "m2", "region": "eu", "status": "retiring", "rooms": 1, "connections": 3, "retireBy": "2026-12-01T14:00:00Z"},
		}}
	case "/v1/rooms":
		var rooms []map[string]any
		for _, n := range s.rooms {
			if reg := r.URL.Query().Get("region"); reg != "" && reg != "eu" {
				continue
			}
			rooms = append(rooms, map[string]any{"name": n, "region": "eu", "instance": "b1", "machineId": "m1", "phase": "playing", "players": 2})
		}
		body = map[string]any{"rooms": rooms}
	case "/v1/events":
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-s.events:
				fmt.Fprint(w, ev)
				w.(http.Flusher).Flush()
			}
		}
	default:
		body = map[string]any{}
	}
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(body)
}

func (s *stubAPI) called(what string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if c == what {
			return true
		}
	}
	return false
}

// waitJS evaluates a JS boolean until it is true or the deadline passes.
func waitJS(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("timed out waiting for %s (%v); page:\n%s", what, err, html)
		}
		time.Sleep(50 * time.Millisecond) // polling the browser, not timing the code under test
	}
}

func do(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](js)); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
}

// The page against a stub API, in a real browser: a wrong key is refused
// and kept nowhere, the right one shows the fleet (a retiring relay apart,
// with its latest stop), an event refreshes it without a reload, and
// drain and close reach the API.
func TestPageInABrowser(t *testing.T) {
	hostile := `<img src=x onerror="window.__xss=1">`
	api := &stubAPI{key: "0123456789abcdef0123456789abcdef", status: "live", rooms: []string{"alpha", hostile}, events: make(chan string, 8)}
	mux := http.NewServeMux()
	mux.Handle(Path, Handler())
	mux.Handle("/v1/", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close) // after the browser's cleanup, which ends its event stream
	ctx := browser.New(t, 1200, 900)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+Path)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the login form", `document.getElementById("login-form").checkVisibility()`)

	do(t, ctx, `document.getElementById("key").value = "wrong-wrong-wrong-1"; document.getElementById("login-form").requestSubmit()`)
	waitJS(t, ctx, "the refusal", `document.getElementById("login-error").textContent.includes("refused")`)
	if stored, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`sessionStorage.length > 0`)); stored {
		t.Error("a refused key was kept in sessionStorage")
	}

	do(t, ctx, `document.getElementById("key").value = "`+api.key+`"; document.getElementById("login-form").requestSubmit()`)
	waitJS(t, ctx, "the relay row", `document.querySelector('#relays tr[data-boot="b1"]') !== null`)
	waitJS(t, ctx, "the room row", `document.querySelector('#rooms tr[data-room="alpha"]') !== null`)
	// A retiring relay is shown apart, with its rooms, players and latest
	// stop, and offers no drain.
	waitJS(t, ctx, "the retiring relay apart", `!document.getElementById("retiring-section").hidden &&
		document.querySelector('#relays tr[data-boot="b2"]') === null &&
		document.querySelector('#retiring tr[data-boot="b2"] .retire-by').textContent === "2026-12-01T14:00:00Z" &&
		[...document.querySelectorAll('#retiring tr[data-boot="b2"] td')].map((td) => td.textContent).join("|") === "eu|m2|b2|-|1|3|2026-12-01T14:00:00Z" &&
		document.querySelector('#retiring button') === null &&
		document.querySelector('[data-stat="retiring"]').textContent === "1"`)
	// A room name is text, never markup.
	if xss, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss === undefined && document.querySelectorAll("#rooms img").length === 0 &&
		[...document.querySelectorAll("#rooms td")].some((td) => td.textContent === `+"`"+hostile+"`"+`)`)); err != nil || !xss {
		t.Errorf("a hostile room name was not shown as text: %v", err)
	}
	waitJS(t, ctx, "the live stream", `document.getElementById("conn").textContent === "live"`)
	// The chart has the balancer's last hour and the samples since.
	waitJS(t, ctx, "the chart's history", `Number(document.getElementById("chart").dataset.points) >= 3`)
	if url, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); strings.Contains(url, api.key) {
		t.Errorf("the key is in the URL %s", url)
	}

	// A room created elsewhere appears from the event stream, no reload.
	do(t, ctx, `window.__marker = 1`)
	api.mu.Lock()
	api.rooms = append(api.rooms, "bravo")
	api.mu.Unlock()
	api.events <- "event: room_create\ndata: {\"name\":\"bravo\"}\n\n"
	waitJS(t, ctx, "the new room", `document.querySelector('#rooms tr[data-room="bravo"]') !== null && window.__marker === 1`)

	// Drain from the page; the row shows it.
	do(t, ctx, `document.querySelector('#relays tr[data-boot="b1"] button').click()`)
	waitJS(t, ctx, "the draining status", `document.querySelector('#relays tr[data-boot="b1"] .status').textContent === "draining"`)
	if !api.called("POST /v1/instances/b1/drain") {
		t.Errorf("no drain call: %v", api.calls)
	}

	// Close takes two clicks (a confirmation), then the row goes.
	do(t, ctx, `document.querySelector('#rooms tr[data-room="alpha"] button').click()`)
	waitJS(t, ctx, "the confirmation", `document.querySelector('#rooms tr[data-room="alpha"] button').textContent === "Confirm close"`)
	if api.called("DELETE /v1/rooms/alpha") {
		t.Fatal("one click closed the room")
	}
	do(t, ctx, `document.querySelector('#rooms tr[data-room="alpha"] button').click()`)
	waitJS(t, ctx, "the closed room to go", `document.querySelector('#rooms tr[data-room="alpha"]') === null`)
	if !api.called("DELETE /v1/rooms/alpha") {
		t.Errorf("no close call: %v", api.calls)
	}
}

// signedIn opens the page at a window size against api and signs in.
func signedIn(t *testing.T, api *stubAPI, width, height int) context.Context {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(Path, Handler())
	mux.Handle("/v1/", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := browser.New(t, width, height)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+Path)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the login form", `document.getElementById("login-form").checkVisibility()`)
	do(t, ctx, `document.getElementById("key").value = "`+api.key+`"; document.getElementById("login-form").requestSubmit()`)
	waitJS(t, ctx, "the relay row", `document.querySelector('#relays tr[data-boot="b1"]') !== null`)
	return ctx
}

// TestChartReadsOnAPhoneAndADesktop: the history chart's labels are drawn
// at a readable size (at least 11 CSS pixels) in a phone's 390 px and a
// desktop's 1280 px, it has a legend, and its time axis fits the data (30
// minutes of history fill the width instead of half of a fixed hour).
func TestChartReadsOnAPhoneAndADesktop(t *testing.T) {
	for _, size := range [][2]int{{390, 844}, {1280, 900}} {
		t.Run(fmt.Sprintf("%dpx", size[0]), func(t *testing.T) {
			api := &stubAPI{key: "0123456789abcdef0123456789abcdef", status: "live", rooms: []string{"alpha"}, events: make(chan string, 8)}
			ctx := signedIn(t, api, size[0], size[1])
			waitJS(t, ctx, "the chart's history", `Number(document.getElementById("chart").dataset.points) >= 3`)
			// A label's font size as drawn: its CSS size times the SVG's scale.
			smallest, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`Math.min(...[...document.querySelectorAll("#chart text")].map((e) =>
				parseFloat(getComputedStyle(e).fontSize) * e.getScreenCTM().a))`))
			if err != nil || smallest < 11 {
				t.Errorf("the chart's smallest label is drawn at %.1f px (%v), want at least 11 (the page's small print is 12)", smallest, err)
			}
			legend, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#chart-legend li")].filter((li) => li.getBoundingClientRect().height > 0).map((li) => li.textContent).join(",")`))
			if legend != "Players,Rooms" {
				t.Errorf("legend %q, want Players,Rooms shown", legend)
			}
			span, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("chart").dataset.spanMinutes`))
			if span != "30" {
				t.Errorf("the time axis spans %s minutes for 30 minutes of history, want 30", span)
			}
			// The oldest sample sits at the left edge, not in the middle.
			left, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => { const svg = document.getElementById("chart");
				const pl = svg.querySelector("polyline.players"); const x = Number(pl.getAttribute("points").split(",")[0]);
				return x / svg.viewBox.baseVal.width; })()`))
			if left > 0.1 {
				t.Errorf("the oldest sample is drawn at %.0f%% of the width, want the left edge", left*100)
			}
		})
	}
}

// TestFilterAndActionErrors: a filter the balancer refuses is said beside
// the filters and empties the rooms table (no unfiltered rows under a
// filter); a relay's full boot ID is the short one's tooltip; a failed
// action's error stays until dismissed, whatever refreshes come.
func TestFilterAndActionErrors(t *testing.T) {
	api := &stubAPI{key: "0123456789abcdef0123456789abcdef", status: "live", rooms: []string{"alpha", "stuck"}, events: make(chan string, 8)}
	ctx := signedIn(t, api, 1280, 900)
	waitJS(t, ctx, "the room rows", `document.querySelectorAll("#rooms tbody tr").length === 2`)
	if title, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#rooms tr[data-room="alpha"] td[data-col="Relay"]').title`)); !strings.Contains(title, "boot b1") {
		t.Errorf("the relay cell's tooltip is %q, want the full boot id", title)
	}

	do(t, ctx, `document.querySelector('#filters input[name="region"]').value = "bad!"; document.getElementById("filters").requestSubmit()`)
	waitJS(t, ctx, "the filter's error", `document.getElementById("filter-error").textContent.includes("malformed")`)
	if rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rooms tbody tr").length`)); rows != 0 {
		t.Errorf("a refused filter left %d unfiltered rows in the table", rows)
	}
	do(t, ctx, `document.querySelector('#filters input[name="region"]').value = ""; document.getElementById("filters").requestSubmit()`)
	waitJS(t, ctx, "the rows back, the error gone", `document.querySelectorAll("#rooms tbody tr").length === 2 && document.getElementById("filter-error").textContent === ""`)

	do(t, ctx, `document.querySelector('#rooms tr[data-room="stuck"] button').click()`)
	waitJS(t, ctx, "the confirmation", `document.querySelector('#rooms tr[data-room="stuck"] button').textContent === "Confirm close"`)
	do(t, ctx, `document.querySelector('#rooms tr[data-room="stuck"] button').click()`)
	waitJS(t, ctx, "the action's error", `!document.getElementById("action-error").hidden && document.getElementById("action-error").textContent.includes("did not answer")`)
	// Refreshes (an event, then the filter button) do not clear it.
	api.events <- "event: room_update\ndata: {}\n\n"
	do(t, ctx, `window.__n = document.querySelectorAll("#rooms tbody tr").length; document.getElementById("filters").requestSubmit()`)
	waitJS(t, ctx, "a refresh", `document.querySelectorAll("#rooms tbody tr").length === window.__n`)
	if shown, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("action-error").hidden`)); !shown {
		t.Fatal("a refresh cleared the failed action's error")
	}
	do(t, ctx, `document.getElementById("action-dismiss").click()`)
	waitJS(t, ctx, "the dismissed error", `document.getElementById("action-error").hidden`)
}

// TestPrematureSignInKeepsTheKeyOutOfURLs: until app.js has taken the
// form's submit (here it never loads, as on a failed or slow fetch), the
// sign-in form is not shown, and a submit anyway (a password manager's,
// or Enter before the script ran) posts the key to the page, which
// refuses the method: the key is in no URL the browser asked for or
// shows, nor in the answer.
func TestPrematureSignInKeepsTheKeyOutOfURLs(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	var mu sync.Mutex
	var seen []string // "GET /dashboard/", ... in order
	page := Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		if r.URL.Path == Path+"app.js" {
			http.NotFound(w, r) // the script does not arrive
			return
		}
		page.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx := browser.New(t, 1200, 900)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+Path)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the page without its script", `document.readyState === "complete"`)
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`["login-form", "key", "login-wait"].map((id) => id + "=" + document.getElementById(id).checkVisibility()).join(" ")`))
	if err != nil || shown != "login-form=false key=false login-wait=true" {
		t.Errorf("without the script: %s (%v), want the form hidden and the wait note shown", shown, err)
	}

	do(t, ctx, `window.__before = 1; document.getElementById("key").value = "`+key+`"; document.getElementById("login-form").requestSubmit()`)
	waitJS(t, ctx, "the submit's answer", `window.__before === undefined && document.readyState === "complete"`)
	url, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(url, key[:4]) || strings.Contains(text, key[:4]) {
		t.Errorf("after a premature submit the key shows (at %s, or in the page's %d bytes)", url, len(text))
	}
	var submitted bool
	for _, s := range seen[1:] {
		if strings.Contains(s, key[:4]) {
			t.Errorf("the browser asked for %q: the key in a URL", s)
		}
		submitted = submitted || s == "POST "+Path
	}
	if !submitted {
		t.Errorf("no POST %s among %q: the submit did not happen as a POST", Path, seen)
	}
}
