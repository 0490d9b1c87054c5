package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ankusa-go/ankusa/test/leak"
)

// chromiumPath is Debian's chromium (scripts/prereq.sh and .ci/run install it).
const chromiumPath = "/usr/bin/chromium"

// browser is the one headless Chromium of this test package: started by the first test that needs it, shut
// down after the last, each test working in a browser context of its own (cookies not shared).
type browser struct {
	once   sync.Once
	ctx    context.Context
	stop   func()
	err    error
	tmpDir string
}

var shared browser

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	if shared.tmpDir != "" {
		_ = os.RemoveAll(shared.tmpDir)
	}
	os.Exit(leak.Check(code))
}

// newTab returns a tab in a fresh browser context (its own cookie jar) of the package's browser. Without
// chromium the test fails under CI=true and is skipped elsewhere.
func newTab(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		p, lerr := exec.LookPath("chromium")
		if lerr != nil {
			msg := "chromium is not installed (apt-get install -y chromium; scripts/prereq.sh does)"
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s (CI=true: a test whose tool is missing fails, it never skips)", msg)
			}
			t.Skip(msg)
		}
		path = p
	}
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "ankusa-console-chromium-")
		if err != nil {
			shared.err = err
			return
		}
		shared.tmpDir = dir
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(dir), chromedp.WindowSize(1366, 900))
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil {
			bcancel()
			acancel()
			shared.err = fmt.Errorf("cannot start chromium: %w", err)
			return
		}
		shared.ctx = bctx
		shared.stop = func() { bcancel(); acancel() }
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	tab, cancel := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run opens the tab, which lives as long as the context of that run: run it on tab itself, so
	// the deadlines of later steps do not close it.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("cannot open a tab: %v", err)
	}
	return tab
}
