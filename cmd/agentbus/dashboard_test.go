package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// TestDashboardRendersRunsInHeadlessChromium serves the dashboard from the
// ingress of an in-process agentbus with three finished demo runs, loads it
// in a real headless Chromium with the oldest run selected in the URL, and
// checks the rendered DOM: the terminal-codes chart has a SUCCESS bar, the
// runs table lists the three runs, the run viewer's timeline has a bar per
// step of the selected run and its DAG a node per step. It saves a
// screenshot (and the dumped DOM) under $AGENTBUS_TEST_ARTIFACTS, or a
// temporary folder, and logs where.
func TestDashboardRendersRunsInHeadlessChromium(t *testing.T) {
	chromium := findChromium(t)
	// engagement_analytics fails its first call: the first run replans
	// (and then succeeds), so the page has a skill failure and a replan to show.
	s, _ := startStackWith(t, demo.Config{FailFirst: map[string]int{demo.SkillEngagementAnalytics: 1}})
	base := "http://" + s.IngressAddr

	// The page and its assets are static, served unauthenticated with a
	// strict Content-Security-Policy.
	for path, ctype := range map[string]string{"/dashboard": "text/html", "/dashboard/": "text/html",
		"/dashboard/app.js": "text/javascript", "/dashboard/playground.js": "text/javascript", "/dashboard/style.css": "text/css"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") || len(body) == 0 {
			t.Fatalf("GET %s: %d %q CSP %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"),
				resp.Header.Get("Content-Security-Policy"), len(body))
		}
	}

	// Three runs to completion, their plans projected and traces indexed.
	var plans []store.Plan
	for i := range 3 {
		res := postRun(t, base, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: fmt.Sprintf("sess-dash-%d", i),
			Message: demoTask})
		if res.TerminalCode != orch.CodeSuccess {
			t.Fatalf("run %d ended %s/%s: %s", i, res.Status, res.TerminalCode, res.Response)
		}
		p, _ := finalPlan(t, s, "demo", res.PlanID)
		if len(p.Steps) == 0 {
			t.Fatalf("plan %s has no steps", p.PlanID)
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		eventually(t, 10*time.Second, "the trace of "+p.PlanID+" to hold run.finished", func() bool {
			var tr struct {
				Events []store.Event `json:"events"`
			}
			if !tryGetJSON(t, base+"/agent/plans/"+p.PlanID+"/trace", &tr) {
				return false
			}
			for _, ev := range tr.Events {
				if ev.EventType == "run.finished" {
					return true
				}
			}
			return false
		})
	}
	eventually(t, 10*time.Second, "GET /agent/runs to list the three runs", func() bool {
		var rr struct {
			Runs []struct {
				PlanID string `json:"plan_id"`
			} `json:"runs"`
		}
		if !tryGetJSON(t, base+"/agent/runs?limit=50", &rr) {
			return false
		}
		listed := map[string]bool{}
		for _, r := range rr.Runs {
			listed[r.PlanID] = true
		}
		for _, p := range plans {
			if !listed[p.PlanID] {
				return false
			}
		}
		return true
	})

	// The oldest run: the page opens the newest by itself, so this shows
	// the URL selects the run.
	sel := plans[0]
	pageURL := base + "/dashboard?tenant=demo#plan=" + sel.PlanID
	out := artifactsDir(t)
	dom := runChromium(t, chromium, "--dump-dom", pageURL)
	domPath := filepath.Join(out, "dashboard.html")
	if err := os.WriteFile(domPath, []byte(dom), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard DOM: %s", domPath)

	// No API error reached the banner.
	if m := regexp.MustCompile(`<div id="errors"[^>]*>`).FindString(dom); m == "" || !strings.Contains(m, "hidden") {
		t.Errorf("the error banner is shown: %s", between(dom, `id="errors"`, `<main`))
	}
	// Fleet health: a SUCCESS bar in the terminal-codes chart, and the tiles.
	codes := between(dom, `id="chart-codes"`, `</figure>`)
	if !hasTag(codes, "rect", `data-label="SUCCESS"`) {
		t.Errorf("the terminal-codes chart has no SUCCESS bar:\n%s", codes)
	}
	if tiles := between(dom, `id="tiles"`, `</figure>`); !strings.Contains(tiles, `data-metric="runs"`) ||
		!strings.Contains(tiles, `data-metric="success_rate"`) {
		t.Errorf("the health tiles are missing:\n%s", tiles)
	}
	skillsChart := between(dom, `id="chart-skills"`, `</figure>`)
	if !hasTag(skillsChart, "rect", `data-label="outlet_list"`, `data-value="0"`) ||
		!regexp.MustCompile(`<rect[^>]*data-label="engagement_analytics" data-value="0\.\d+"`).MatchString(skillsChart) {
		t.Errorf("the skill failure chart does not show engagement_analytics failing and outlet_list not:\n%s", skillsChart)
	}
	// Recent runs: every run's plan id, and the selected one marked.
	runs := between(dom, `<table id="runs"`, `</table>`)
	for _, p := range plans {
		if !strings.Contains(runs, `data-plan-id="`+p.PlanID+`"`) {
			t.Errorf("the runs table does not list %s:\n%s", p.PlanID, runs)
		}
	}
	if !hasTag(runs, "tr", `data-plan-id="`+sel.PlanID+`"`, `aria-selected="true"`) {
		t.Errorf("the runs table does not mark %s as selected", sel.PlanID)
	}
	// The run viewer shows the selected run: a timeline bar and a DAG node
	// per step.
	if summary := between(dom, `id="run-summary"`, `id="timeline"`); !strings.Contains(summary, sel.PlanID) {
		t.Errorf("the run viewer does not show %s:\n%s", sel.PlanID, summary)
	}
	timeline := between(dom, `id="timeline"`, `class="legend"`)
	bars := regexp.MustCompile(`<rect[^>]*class="bar[ "][^>]*>`).FindAllString(timeline, -1)
	if len(bars) < len(sel.Steps) {
		t.Errorf("the timeline has %d bars for %d steps:\n%s", len(bars), len(sel.Steps), timeline)
	}
	if sel.ReplanCount != 1 || !hasTag(timeline, "line", `class="marker-replan"`) {
		t.Errorf("the timeline marks no replan of %s (replan_count %d)", sel.PlanID, sel.ReplanCount)
	}
	dag := between(dom, `id="dag"`, `id="steps"`)
	for _, st := range sel.Steps {
		bar := false
		for _, b := range bars {
			bar = bar || strings.Contains(b, `data-task-id="`+st.TaskID+`"`)
		}
		if !bar {
			t.Errorf("the timeline has no bar for step %d (%s)", st.StepIndex, st.TaskID)
		}
		if !hasTag(dag, "g", `class="node`, `data-kind="step"`, `data-id="step/`+st.TaskID+`"`) {
			t.Errorf("the DAG has no node for step %d (%s)", st.StepIndex, st.TaskID)
		}
	}
	for _, kind := range []string{"routing", "plan", "synthesis", "answer"} {
		if !hasTag(dag, "g", `class="node`, `data-kind="`+kind+`"`) {
			t.Errorf("the DAG has no %s node", kind)
		}
	}
	if n := strings.Count(dag, `class="edge`); n < len(sel.Steps)+2 {
		t.Errorf("the DAG has %d edges", n)
	}
	if t.Failed() {
		t.Logf("rendered DOM (%d bytes) kept at %s", len(dom), domPath)
	}

	// The screenshot, for a human to look at.
	shot := filepath.Join(out, "dashboard.png")
	_ = os.Remove(shot)
	runChromium(t, chromium, "--screenshot="+shot, pageURL)
	img, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil || len(img) < 20<<10 || cfg.Width < 800 || cfg.Height < 600 {
		t.Fatalf("screenshot %s: %d bytes, %dx%d, %v", shot, len(img), cfg.Width, cfg.Height, err)
	}
	t.Logf("dashboard screenshot: %s (%dx%d, %d KiB)", shot, cfg.Width, cfg.Height, len(img)>>10)
}

// TestDashboardFollowsAParkedRunLive opens, in headless Chromium, a run
// that waits at a gate (the demo's outlet_list annotated destructive): the
// run viewer says it is live and keeps reading the run, its step's bar
// waits at the gate and the gate is marked on the timeline.
func TestDashboardFollowsAParkedRunLive(t *testing.T) {
	chromium := findChromium(t)
	destructive := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true)}
	s, _ := startStackWith(t, demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: destructive}})
	base := "http://" + s.IngressAddr
	res := postRun(t, base, orch.RunRequest{TenantID: "demo", UserID: "u1", SessionID: "sess-dash-live", Message: demoTask})
	if res.Status != orch.PlanAwaitingGate {
		t.Fatalf("the run did not park: %s %s", res.Status, res.TerminalCode)
	}
	eventually(t, 10*time.Second, "the trace of "+res.PlanID+" to hold gate.opened", func() bool {
		var tr struct {
			Events []store.Event `json:"events"`
		}
		if !tryGetJSON(t, base+"/agent/plans/"+res.PlanID+"/trace", &tr) {
			return false
		}
		for _, ev := range tr.Events {
			if ev.EventType == "gate.opened" {
				return true
			}
		}
		return false
	})
	dom := runChromium(t, chromium, "--dump-dom", base+"/dashboard?tenant=demo#plan="+res.PlanID)
	if m := regexp.MustCompile(`<div id="errors"[^>]*>`).FindString(dom); !strings.Contains(m, "hidden") {
		t.Errorf("the error banner is shown: %s", between(dom, `id="errors"`, `<main`))
	}
	viewer := between(dom, `<section id="viewer"`, `</section>`)
	reads := regexp.MustCompile(`<section id="viewer"[^>]*data-reads="(\d+)"`).FindStringSubmatch(dom)
	if len(reads) < 2 || reads[1] == "1" || !strings.Contains(viewer, `class="live"`) {
		t.Errorf("the viewer does not follow the parked run live (reads %v):\n%s", reads, between(viewer, `id="run-summary"`, `id="timeline"`))
	}
	if !hasTag(viewer, "rect", `class="bar waiting"`) || !hasTag(viewer, "line", `class="marker-gate"`) {
		t.Errorf("the timeline shows no step waiting at a gate:\n%s", between(viewer, `id="timeline"`, `class="legend"`))
	}
	if !hasTag(viewer, "g", `class="node kind-step waiting"`, `data-kind="step"`) {
		t.Errorf("the DAG shows no waiting step:\n%s", between(viewer, `id="dag"`, `id="steps"`))
	}
}

// findChromium returns the headless browser's path; its absence fails the
// test (deploy/browser/setup.sh installs it).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no chromium on PATH: run deploy/browser/setup.sh (as root: apt-get install chromium)")
	return ""
}

// artifactsDir is where the test leaves its screenshot: $AGENTBUS_TEST_ARTIFACTS
// if set, else a temporary folder.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENTBUS_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatalf("AGENTBUS_TEST_ARTIFACTS: %v", err)
	}
	return dir
}

// runChromium loads url in headless Chromium with a throwaway profile,
// lets the page's fetches and timers run for a few seconds of virtual
// time, and returns what it printed (the DOM, with --dump-dom).
func runChromium(t *testing.T, chromium, mode, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--metrics-recording-only",
		"--mute-audio", "--hide-scrollbars", "--force-color-profile=srgb", "--window-size=1400,1000",
		"--run-all-compositor-stages-before-draw", "--virtual-time-budget=8000", mode, url}
	cmd := exec.CommandContext(ctx, chromium, args...)
	// Chromium forks helpers: a timeout kills the whole process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v (ctx %v)\nstderr:\n%s", mode, err, ctx.Err(), tail(stderr.String(), 4000))
	}
	return stdout.String()
}

// tryGetJSON reads a demo-tenant API answer into v; false on any failure.
func tryGetJSON(t *testing.T, url string, v any) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", "demo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
}

// between returns s from the first from up to the next to after it ("" if
// from is absent; the rest of s if to is).
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s[len(from):], to); j >= 0 {
		return s[:len(from)+j]
	}
	return s
}

// hasTag says whether s holds an opening <name …> tag with every one of
// attrs (each a full `key="value"` or a prefix such as `class="node`).
func hasTag(s, name string, attrs ...string) bool {
	for _, tag := range regexp.MustCompile(`<`+name+`\b[^>]*>`).FindAllString(s, -1) {
		all := true
		for _, a := range attrs {
			all = all && strings.Contains(tag, " "+a)
		}
		if all {
			return true
		}
	}
	return false
}
