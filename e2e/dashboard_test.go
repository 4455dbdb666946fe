package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/purrfly/purrfly/client"
	"github.com/purrfly/purrfly/devstack"
	"github.com/purrfly/purrfly/internal/browser"
	"github.com/purrfly/purrfly/internal/testutil"
)

// TestDashboardInABrowser: the balancer's page in a real headless
// Chromium against a devstack of real relays. Sign in, see both relays, see
// a room a game host creates appear without a reload, drain a relay from the
// page and see its status change (and the balancer agree), close a room
// from the page (its host's socket closed), and read the page at a phone's
// width. PURRFLY_SCREENSHOT=docs/dashboard.png writes README's screenshot.
func TestDashboardInABrowser(t *testing.T) {
	st := startDev(t, func(o *devstack.Options) { o.AdminKey = e2eAdminKey })
	admin := client.NewAdmin(st.bal.URL(), e2eAdminKey)
	ctx := browser.New(t, 1280, 960)
	page := st.bal.URL() + "/dashboard/"
	run := func(js string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](js)); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	until := func(what, js string) {
		t.Helper()
		testutil.Eventually(t, stepTimeout, what, func() bool {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
			return err == nil && ok
		})
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	until("the sign-in form", `document.getElementById("login-form").checkVisibility()`)
	run(`document.getElementById("key").value = "` + e2eAdminKey + `"; document.getElementById("login-form").requestSubmit()`)
	until("both relays", `document.querySelectorAll("#relays tbody tr").length === 2`)
	until("the live stream", `document.getElementById("conn").textContent === "live"`)
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-stat="relays"]').textContent`)); n != "2" {
		t.Errorf("relays stat %q, want 2", n)
	}

	// A game host allocates a room: it appears, no reload.
	run(`window.__sameDocument = true`)
	o := allocHost(t, st.api, "eu", "dash-room")
	until("the new room", `document.querySelector('#rooms tr[data-room="dash-room"]') !== null && window.__sameDocument === true`)

	// Drain the us relay from the page.
	var usBoot string
	insts, err := admin.Instances(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		if in.Region == "us" {
			usBoot = in.BootID
		}
	}
	row := `#relays tr[data-boot="` + usBoot + `"]`
	run(`document.querySelector('` + row + ` button').click()`)
	until("the us relay draining", `document.querySelector('`+row+` .status').textContent === "draining"`)
	if in, err := admin.Instance(tctx(t), usBoot); err != nil || in.Status != "draining" {
		t.Errorf("the balancer after the page's drain: %+v %v", in, err)
	}
	if os.Getenv("PURRFLY_SCREENSHOT") != "" {
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("PURRFLY_SCREENSHOT"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Close the room: two clicks; the host's socket closes.
	closeBtn := `document.querySelector('#rooms tr[data-room="dash-room"] button')`
	run(closeBtn + `.click()`)
	until("the confirmation", closeBtn+`.textContent === "Confirm close"`)
	run(closeBtn + `.click()`)
	until("the room gone", `document.querySelector('#rooms tr[data-room="dash-room"]') === null`)
	cctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	if _, err := o.host.Next(cctx); client.CloseStatus(err) != 1000 {
		t.Errorf("host after the page's close: %v, want close 1000", err)
	}

	// At a phone's width the tables become cards and nothing scrolls sideways.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	phone, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const tr = document.querySelector("#relays tbody tr");
		const wide = document.documentElement.scrollWidth > window.innerWidth + 1;
		return getComputedStyle(tr).display + (wide ? " overflow" : "");
	})()`))
	if err != nil || strings.TrimSpace(phone) != "block" {
		t.Errorf("at 390 px: %q %v, want rows as blocks and no sideways scroll", phone, err)
	}
}
