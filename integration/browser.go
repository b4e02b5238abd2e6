package integration

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// requireBrowserEnv makes the browser tests fail, rather than skip, when
// no browser is found (CI sets it).
const requireBrowserEnv = "JOBMASTER_REQUIRE_BROWSER"

// browserEnv names a browser binary to use instead of the ones looked for.
const browserEnv = "JOBMASTER_BROWSER"

// findBrowser is the path of a Chromium or Chrome, or "".
func findBrowser() string {
	if p := os.Getenv(browserEnv); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless browser for the test and returns a tab's
// context, cancelled (the browser stopped) when the test ends. Without a
// browser the test is skipped, or fails when JOBMASTER_REQUIRE_BROWSER=1.
func newBrowser(t *testing.T, width, height int) context.Context {
	t.Helper()
	path := findBrowser()
	if path == "" {
		if os.Getenv(requireBrowserEnv) == "1" {
			t.Fatalf("no chromium found (install Debian's chromium, or set %s) and %s=1", browserEnv, requireBrowserEnv)
		}
		t.Skipf("no chromium found: install Debian's chromium, or set %s", browserEnv)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,        // CI runs as root
		chromedp.IgnoreCertErrors, // the clusters' CAs are the tests' own
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// browse runs the actions in the tab, failing the test with what it was
// waiting for if they take longer than timeout.
func browse(t *testing.T, ctx context.Context, what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		page, _ := chromedp.Run(pctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, page)
	}
}

// js waits until the JavaScript expression is true in the page.
func js(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond))(ctx, t)
		return err
	})
}

// eval evaluates the JavaScript expression into dst.
func eval[T any](expr string, dst *T) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		v, err := chromedp.Evaluate[T](expr)(ctx, t)
		*dst = v
		return err
	})
}
