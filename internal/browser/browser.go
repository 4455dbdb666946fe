// Package browser starts a real headless Chromium for tests of the pages
// purrfly serves (the balancer's dashboard), driven with chromedp. Debian's
// chromium package provides it (.ci/run installs it when it is missing);
// a machine without one fails the test with the command that fixes it,
// rather than skipping it: a browser test that can silently not run is a
// test that cannot fail.
package browser

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// candidates are the names Chromium goes by; PURRFLY_CHROMIUM overrides.
var candidates = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Path finds the browser, or "".
func Path() string {
	if p := os.Getenv("PURRFLY_CHROMIUM"); p != "" {
		return p
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// New starts a headless browser for the test and returns a tab's context;
// the browser stops at the end of the test. width and height set the
// window (a phone's is about 390x844).
func New(t testing.TB, width, height int) context.Context {
	t.Helper()
	path := Path()
	if path == "" {
		t.Fatal("no Chromium found: install it (Debian: apt-get install -y chromium) or set PURRFLY_CHROMIUM")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.DisableGPU,
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; it must not carry a deadline (that
	// would stop the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium %s did not start: %v", path, err)
	}
	return ctx
}
