package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/statuspage"
	"github.com/outboxd/outboxd/internal/testenv/browser"
	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestStatusPage streams real events through the binary while a load of
// changing pace runs, then loads the status page in a real headless
// Chromium: the page shows the state and the published count, and both
// charts are drawn with the samples of the run. A screenshot goes to the
// test's artefacts ($OUTBOXD_TEST_ARTIFACTS). The load lasts 8s, or
// $OUTBOXD_TEST_PAGE_LOAD (e.g. 4m for the README's screenshot).
func TestStatusPage(t *testing.T) {
	chromium := browser.Find(t) // before starting servers: fail fast without it
	t.Logf("chromium: %s", chromium)
	load := 8 * time.Second
	if v := os.Getenv("OUTBOXD_TEST_PAGE_LOAD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("OUTBOXD_TEST_PAGE_LOAD=%q: %v", v, err)
		}
		load = d
	}
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 40)
	p := e.start(e.args()...)
	base := p.metricsURL()
	e.waitStreaming(p)

	// Pace changes every few seconds, so the rate chart has a shape.
	start := time.Now()
	writes := w.background(0, 0, func(i int) (int, bool) {
		elapsed := time.Since(start)
		if elapsed > load {
			return 0, false
		}
		phase := int(elapsed / (load / 8))
		time.Sleep(time.Duration(1+phase%4*3) * time.Millisecond)
		return 1 + (i+phase)%(4+phase%3*6), true
	})
	if err := writes.Wait(); err != nil {
		t.Fatal(err)
	}
	e.verify(e.js(), check, 2*time.Minute)
	committed := check.Count()
	// Let the lag probe and a few more samples see the end of the load.
	time.Sleep(3 * time.Second)

	dom := browser.DumpDOM(t, base+"/", 3*time.Second)
	if state, _ := statuspage.ReadBody(dom, "state"); state != "streaming" {
		t.Errorf("page state %q, want streaming:\n%s", state, tail(dom, 40))
	}
	if published, _ := statuspage.ReadBody(dom, "published"); published != strconv.Itoa(committed) {
		t.Errorf("page shows published %q, want %d", published, committed)
	}
	seconds := int(load / time.Second)
	points, maxRate := chartData(t, dom, statuspage.RateChart)
	if points < seconds || maxRate <= 0 {
		t.Errorf("rate chart drew %d points, maximum %v events/s; want at least %d points (one a second) above zero", points, maxRate, seconds)
	}
	lagPoints, _ := chartData(t, dom, statuspage.LagChart)
	if lagPoints < seconds/2 {
		t.Errorf("lag chart drew %d points, want at least %d (the probe reads every 2s)", lagPoints, seconds/2)
	}
	t.Logf("%d events; rate chart %d points, max %.0f/s; lag chart %d points", committed, points, maxRate, lagPoints)

	shot := filepath.Join(browser.ArtifactDir(t), "status-page.png")
	browser.Screenshot(t, base+"/", shot, 1200, 540, 3*time.Second)
	t.Logf("screenshot: %s", shot)
	p.stopCleanly()
}

// chartData reads what the page's canvas id says it drew.
func chartData(t *testing.T, dom, id string) (points int, maxV float64) {
	t.Helper()
	points, maxV, ok := statuspage.ReadChart(dom, id)
	if !ok {
		t.Fatalf("no canvas %s with data-points and data-max in the DOM:\n%s", id, tail(dom, 40))
	}
	return points, maxV
}
