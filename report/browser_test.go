package report

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// chromium returns Debian's chromium (or another Chrome) and a browser
// context to open pages in, or skips the test saying why it cannot run.
func chromium(t *testing.T) context.Context {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		testservice.Missing(t, "no Chromium on this machine: install Debian's chromium (apt-get install -y chromium; scripts/test does it as root)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout, which
	// would stop the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		testservice.Missing(t, "Chromium (%s) cannot run here: %v", bin, err)
	}
	return ctx
}

// pageCheck is what the page says about itself once loaded.
type pageCheck struct {
	Expected []string `json:"expected"` // chart ids in the data part
	Charts   []struct {
		ID     string  `json:"id"`
		Width  float64 `json:"width"`
		Height float64 `json:"height"`
		Drawn  int     `json:"drawn"` // paths with a real outline
		Texts  int     `json:"texts"`
	} `json:"charts"`
	Headings []string `json:"headings"`
	Title    string   `json:"title"`
	Scripts  int      `json:"scripts"`
}

const inspect = `(() => {
  const data = JSON.parse(document.getElementById('tare-data').textContent);
  const expected = [];
  for (const r of data.runs) for (const c of r.charts) expected.push(c.id);
  if (data.comparison) for (const c of data.comparison.charts) expected.push(c.id);
  if (data.calendar) for (const c of data.calendar.charts) expected.push(c.id);
  const charts = [...document.querySelectorAll('svg.plot')].map(s => {
    const b = s.getBoundingClientRect();
    return {id: s.id.replace(/^svg-/, ''), width: b.width, height: b.height,
      drawn: [...s.querySelectorAll('path')].filter(p => (p.getAttribute('d') || '').length > 40).length,
      texts: s.querySelectorAll('text').length};
  });
  return {expected, charts, title: document.title, scripts: document.scripts.length,
    headings: [...document.querySelectorAll('section.run h2')].map(h => h.textContent)};
})()`

// TestBrowser opens reports in headless Chromium: every chart renders as a
// non-empty SVG, the console logs no error, the page makes no request, a
// run labelled <script>alert(1)</script> shows the label as text, and a
// screenshot of each page is kept in testdata/out.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	browser := chromium(t)

	const evil = `<script>alert(1)</script>`
	single, _ := seeded.build(t)
	labelled, _ := seeded.build(t)
	labelled.Summary.Run.Label = evil
	labelled.Summary.Run.Target = `GET http://127.0.0.1/"><img src=x onerror=alert(2)>`
	long, _ := synth{seed: 3, ticks: 10_000, rate: 4, steal: [2]int{4000, 4600}, spike: 7321, label: "long"}.build(t)
	cmp := htmlComparison(t)
	var windows []*Run
	for _, w := range cmp.Windows {
		windows = append(windows, w.Run)
	}
	tests := []struct {
		name     string
		page     Page
		headings []string
	}{
		{"report", Page{Runs: []*Run{single}}, []string{"checkout"}},
		{"compare", Page{Comparison: cmp, Runs: windows}, []string{"peak", "offpeak", "mid"}},
		{"escapes", Page{Runs: []*Run{labelled}, Title: evil}, []string{evil}},
		{"long", Page{Runs: []*Run{long}}, []string{"long"}},
		{"calendar", Page{Calendar: calendarFixture(t)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := saveOut(t, tt.name+".html", render(t, tt.page))
			got, problems, shot, loaded := open(t, browser, path)
			out := saveOut(t, tt.name+".png", shot)
			t.Logf("%s: %d charts, loaded in %s; screenshot in %s", tt.name, len(got.Charts), loaded.Round(time.Millisecond), out)
			for _, p := range problems {
				t.Error(p)
			}

			drawn := map[string]bool{}
			for _, c := range got.Charts {
				if c.Width < 300 || c.Height < 100 || c.Drawn == 0 || c.Texts < 3 {
					t.Errorf("chart %s is empty: %.0f×%.0f px, %d drawn paths, %d texts", c.ID, c.Width, c.Height, c.Drawn, c.Texts)
				}
				drawn[c.ID] = true
			}
			if len(got.Expected) == 0 {
				t.Error("the data part lists no chart")
			}
			for _, id := range got.Expected {
				if !drawn[id] {
					t.Errorf("chart %s is in the data part but not on the page", id)
				}
			}
			if fmt.Sprint(got.Headings) != fmt.Sprint(tt.headings) {
				t.Errorf("run headings %q, want %q shown as text", got.Headings, tt.headings)
			}
			if got.Scripts != 1 {
				t.Errorf("%d script elements, want only the data part", got.Scripts)
			}
			if tt.page.Title != "" && got.Title != tt.page.Title {
				t.Errorf("title %q, want %q", got.Title, tt.page.Title)
			}
		})
	}
}

// open loads the file in a new tab of the browser and returns what the
// page says about itself, every problem seen while it loaded (a console
// error, an exception, a dialog, a request other than the file itself or
// a data: URL) and a screenshot of the whole page.
func open(t *testing.T, browser context.Context, file string) (pageCheck, []string, []byte, time.Duration) {
	t.Helper()
	path, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + path
	tab, closeTab := chromedp.NewContext(browser)
	defer closeTab()

	var (
		mu       sync.Mutex // guards problems, appended to by the listener
		problems []string
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	err = chromedp.Listen(tab, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				problem("console.%s called", e.Type)
			}
		case *runtime.EventExceptionThrown:
			problem("exception: %s", e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				problem("console error (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; u != url && !strings.HasPrefix(u, "data:") {
				problem("request to %s", u)
			}
		case *page.EventJavascriptDialogOpening:
			problem("a script opened a %s dialog: %q", e.Type, e.Message)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tab, 60*time.Second)
	defer cancel()
	begin := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	loaded := time.Since(begin)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[pageCheck](inspect))
	if err != nil {
		t.Fatalf("inspect the page: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// Late console messages and requests have a moment to arrive.
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	return got, slices.Clone(problems), shot, loaded
}

// TestBrowserSeesProblems: the checks of TestBrowser do catch a page that
// logs an error and makes a request.
func TestBrowserSeesProblems(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	browser := chromium(t)
	bad := `<!DOCTYPE html><html><body><p>bad</p>
<img src="http://127.0.0.1:9/pixel.png">
<script>console.error("boom")</script>
<script type="application/json" id="tare-data">{"runs":[]}</script></body></html>`
	_, problems, _, _ := open(t, browser, saveOut(t, "bad.html", []byte(bad)))
	joined := strings.Join(problems, "\n")
	for _, want := range []string{"request to http://127.0.0.1:9/pixel.png", "console.error called"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q lack %q", problems, want)
		}
	}
}
