package statuspage

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/internal/testenv/browser"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func lag(v float64) *float64 { return &v }

func TestRecorderRatesAndRing(t *testing.T) {
	r := NewRecorder(nil, time.Second, 5*time.Second) // a ring of 5
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 8 {
		r.record(telemetry.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Published: float64(i * i * 10), LagBytes: lag(float64(i))})
	}
	got := r.Samples()
	if len(got) != 5 {
		t.Fatalf("%d samples, want the ring's 5", len(got))
	}
	for j, s := range got {
		i := j + 3 // samples 3..7 are kept, oldest first
		if want := t0.Add(time.Duration(i) * time.Second).UnixMilli(); s.Time != want {
			t.Errorf("sample %d: time %d, want %d", j, s.Time, want)
		}
		// published i*i*10: the rate between i-1 and i is (2i-1)*10 per second.
		if want := float64((2*i - 1) * 10); s.Rate != want {
			t.Errorf("sample %d: rate %v, want %v", j, s.Rate, want)
		}
		if s.Lag == nil || *s.Lag != float64(i) {
			t.Errorf("sample %d: lag %v, want %d", j, s.Lag, i)
		}
	}
	// A counter that went backwards (it cannot, but never show a negative rate).
	r.record(telemetry.Snapshot{Time: t0.Add(9 * time.Second), Published: 1})
	if s := r.Samples(); s[len(s)-1].Rate != 0 {
		t.Errorf("rate after a drop = %v, want 0", s[len(s)-1].Rate)
	}
}

func TestRecorderRunStops(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	r := NewRecorder(func() telemetry.Snapshot {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return telemetry.Snapshot{Time: time.Now(), Published: float64(calls)}
	}, 10*time.Millisecond, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(r.Samples()); n < 3 {
		t.Errorf("%d samples in 100ms at 10ms, want several", n)
	}
}

// servePage serves the page for a recorder filled with 15 minutes of
// made-up history and returns its URL.
func servePage(t *testing.T) string {
	t.Helper()
	now := time.Now()
	r := NewRecorder(nil, time.Second, DefaultWindow)
	published := 0.0
	for i := 900; i >= 0; i-- {
		published += 400 + 300*float64((i/60)%3)
		r.record(telemetry.Snapshot{Time: now.Add(-time.Duration(i) * time.Second), Published: published,
			LagBytes: lag(float64((i % 120) * 2048))})
	}
	snapshot := func() telemetry.Snapshot {
		return telemetry.Snapshot{Time: now, State: telemetry.Streaming, Ready: true, Stream: "OUTBOX",
			Published: published, InFlight: 12, ReceivedLSN: "0/3A1F2C8", ConfirmedLSN: "0/3A1F100",
			LagBytes: lag(4096), RetainedBytes: lag(1 << 20)}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- telemetry.Serve(ctx, ln, Handler(snapshot, r)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

func TestHandler(t *testing.T) {
	base := servePage(t)
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Self-contained: no URL to anywhere else (no CDN, no fonts).
	if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).Find(page); m != nil {
		t.Errorf("the page refers to %q: it must embed everything", m)
	}
	resp, err = http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	if len(s.Samples) != 900 || s.WindowMS != 900_000 || s.IntervalMS != 1000 || s.Now.State != telemetry.Streaming {
		t.Errorf("status.json: %d samples, window %d ms, interval %d ms, state %q", len(s.Samples), s.WindowMS, s.IntervalMS, s.Now.State)
	}
	if resp, err := http.Get(base + "/nothing-here"); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET /nothing-here = %v %v, want 404", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
}

// TestPageInChromium loads the page in a real headless Chromium: its
// scripts fetch status.json and draw both charts with the history.
func TestPageInChromium(t *testing.T) {
	base := servePage(t)
	dom := browser.DumpDOM(t, base+"/", 3*time.Second)
	checkChart(t, dom, RateChart, 800)
	checkChart(t, dom, LagChart, 800)
	if state, _ := ReadBody(dom, "state"); state != "streaming" || !strings.Contains(dom, "0/3A1F2C8") {
		t.Errorf("the page does not show the state and position:\n%s", dom)
	}
	shot := filepath.Join(browser.ArtifactDir(t), "status-page-synthetic.png")
	browser.Screenshot(t, base+"/", shot, 1200, 760, 3*time.Second)
	t.Logf("screenshot: %s", shot)
}

// checkChart checks that the canvas id drew at least minPoints points
// with a maximum above zero.
func checkChart(t *testing.T, dom, id string, minPoints int) {
	t.Helper()
	points, maxV, ok := ReadChart(dom, id)
	if !ok {
		t.Fatalf("no canvas %s with data-points and data-max in the DOM:\n%s", id, dom)
	}
	if points < minPoints || maxV <= 0 {
		t.Errorf("%s drew %d points with maximum %v, want at least %d above zero", id, points, maxV, minPoints)
	}
}
