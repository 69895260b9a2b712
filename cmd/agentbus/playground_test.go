package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

// skillLatency is how long each demo skill call takes in the playground
// test: long enough that a run's progress is seen arriving while it runs.
const skillLatency = 400 * time.Millisecond

// TestPlayground_AsksStreamsAndDecidesAGateInHeadlessChromium drives the
// dashboard's playground in a real headless Chromium (over the DevTools
// protocol) against an in-process agentbus whose outlet_list is
// destructive. It picks the tenant in the page and one of the tenant's
// agents, asks the demo question as user ada and sees the run's progress
// and then its gate, with the packet, appear. It approves the gate from
// the page and sees the run go on: progress arrives while it runs, the
// answer is drawn piece by piece from its chunks before the result, and
// the run ends SUCCESS with a link that opens it in the run viewer. The
// gate records ada as its approver. Asked again in a new conversation,
// the gate denied from the page ends the run USER_CANCEL.
func TestPlayground_AsksStreamsAndDecidesAGateInHeadlessChromium(t *testing.T) {
	chromium := findChromium(t)
	destructive := &skills.Annotations{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true)}
	s, _ := startStackWith(t, demo.Config{Hints: map[string]*skills.Annotations{demo.SkillOutletList: destructive},
		Latency: skillLatency})
	base := "http://" + s.IngressAddr
	agent := createAgent(t, base, "demo", `{"name":"Analyst","system_prompt":"Rank outlets by engagement.","tools":["outlet_list","engagement_analytics"]}`)

	b := newBrowser(t, chromium)
	// Another tenant first: it has no agents. Then the demo tenant, chosen
	// in the page, and its agent.
	b.do("open the dashboard", chromedp.Navigate(base+"/dashboard?tenant=acme"))
	b.waitJS("the playground to list tenant acme's agents (none)", `document.getElementById('pg-agent').getAttribute('data-loaded') === '0'`)
	b.do("choose tenant demo", chromedp.SetValue(chromedp.ID("tenant"), "demo"), chromedp.Click(chromedp.CSS(`#tenant-form button[type="submit"]`)))
	b.waitJS("the agent to be listed", `!!document.querySelector('#pg-agent option[value="`+agent+`"]')`)
	b.do("pick the agent, the user and ask",
		chromedp.SetValue(chromedp.ID("pg-agent"), agent),
		chromedp.SetValue(chromedp.ID("pg-user"), "ada"),
		chromedp.SendKeys(chromedp.ID("pg-question"), demoTask))
	b.recordExchanges()
	b.do("ask", chromedp.Click(chromedp.ID("pg-ask")))

	// Progress, then the gate with its packet.
	b.waitJS("the gate to open", `!!document.querySelector('#pg-x1 .pg-gate[data-status="open"]')`)
	x1 := b.text("#pg-x1")
	for _, want := range []string{"routing.decided", "plan.received", "Approval needed", "step 1 wants to call", demo.SkillOutletList,
		skills.ModeDestructive, "Analyst"} {
		if !strings.Contains(x1, want) {
			t.Errorf("the exchange waiting at its gate does not show %q:\n%s", want, x1)
		}
	}
	if st := b.attr("#pg-x1", "data-state"); st != "awaiting_gate" {
		t.Errorf("the exchange is %q, want awaiting_gate", st)
	}
	runID, planID := b.attr("#pg-x1", "data-run-id"), b.attr("#pg-x1", "data-plan-id")
	if runID == "" || planID != orch.PlanID(runID) {
		t.Fatalf("the exchange names run %q and plan %q", runID, planID)
	}
	if b.text("#pg-x1 .pg-answer") != "" {
		t.Errorf("an answer before the gate was decided: %s", b.text("#pg-x1 .pg-answer"))
	}
	gateID := b.attr("#pg-x1 .pg-gate", "data-gate-id")

	// Approve it from the page: the run goes on and its answer streams in.
	approvedAt := b.now()
	b.do("approve", chromedp.SetValue(chromedp.CSS("#pg-x1 .pg-comment"), "fine by me"), chromedp.Click(chromedp.CSS("#pg-x1 .pg-approve")))
	b.waitJS("the run to finish", `document.getElementById('pg-x1').getAttribute('data-state') === 'finished'`)
	if code := b.attr("#pg-x1", "data-terminal-code"); code != orch.CodeSuccess {
		t.Fatalf("the run ended %q:\n%s", code, b.text("#pg-x1"))
	}
	if st := b.attr("#pg-x1 .pg-gate", "data-status"); st != "approved" {
		t.Errorf("the gate shows %q after the approval", st)
	}
	answer := b.text("#pg-x1 .pg-answer")
	assertRanked(t, answer, expectedRanking(t, s.SkillsURL, "demo"))
	log, order := b.exchangeLog(1)
	assertStreamed(t, log, order, approvedAt)

	// The gate records its approver and comment.
	var gates struct {
		Gates []struct {
			GateID    string `json:"gate_id"`
			Status    string `json:"status"`
			DecidedBy string `json:"decided_by"`
			Comment   string `json:"comment"`
		} `json:"gates"`
	}
	if !tryGetJSON(t, base+"/agent/runs/"+runID+"/approvals", &gates) || len(gates.Gates) != 1 ||
		gates.Gates[0].GateID != gateID || gates.Gates[0].Status != orch.GateApproved || gates.Gates[0].DecidedBy != "ada" ||
		gates.Gates[0].Comment != "fine by me" {
		t.Errorf("the run's gates: %+v", gates.Gates)
	}
	var exec struct {
		AgentID string `json:"agent_id"`
	}
	eventually(t, 10*time.Second, "the run's execution record", func() bool {
		return tryGetJSON(t, base+"/agent/executions/"+runID, &exec)
	})
	if exec.AgentID != agent {
		t.Errorf("the run acted as %q, want the agent picked in the page, %s", exec.AgentID, agent)
	}

	// The link opens the run in the run viewer.
	b.do("open the run in the viewer", chromedp.Click(chromedp.CSS("#pg-x1 a.pg-run-link")))
	b.waitJS("the run viewer to show the run", `document.getElementById('run-summary').textContent.indexOf('`+planID+`') >= 0 &&
		document.querySelectorAll('#timeline rect.bar').length >= 2 && location.hash.indexOf('plan=`+planID+`') >= 0`)
	b.screenshot("playground.png")

	// A new conversation: the same question, denied.
	b.do("ask again", chromedp.Click(chromedp.ID("pg-new")), chromedp.SetValue(chromedp.ID("pg-agent"), ""),
		chromedp.SendKeys(chromedp.ID("pg-question"), demoTask), chromedp.Click(chromedp.ID("pg-ask")))
	b.waitJS("the second gate to open", `!!document.querySelector('#pg-x2 .pg-gate[data-status="open"]')`)
	if b.attr("#pg-x2", "data-run-id") == runID {
		t.Fatal("the second question did not start a run of its own")
	}
	b.do("deny", chromedp.Click(chromedp.CSS("#pg-x2 .pg-deny")))
	b.waitJS("the denied run to finish", `document.getElementById('pg-x2').getAttribute('data-state') === 'finished'`)
	if code, st := b.attr("#pg-x2", "data-terminal-code"), b.attr("#pg-x2 .pg-gate", "data-status"); code != orch.CodeUserCancel || st != "rejected" {
		t.Errorf("the denied run ended %q with its gate %q:\n%s", code, st, b.text("#pg-x2"))
	}
	if b.text("#pg-x2 .pg-delta") != "" {
		t.Errorf("the denied run streamed an answer: %s", b.text("#pg-x2 .pg-answer"))
	}
	if hidden := b.eval(`document.getElementById('errors').hidden`); hidden != "true" {
		t.Errorf("the error banner is shown: %s", b.text("#errors"))
	}
}

// exchangeSnapshot is the playground's exchange as a mutation of the page
// left it: when (ms on the page's clock), its state, the progress events
// shown, and the answer and its streamed pieces so far.
type exchangeSnapshot struct {
	T      float64  `json:"t"`
	State  string   `json:"state"`
	Events []string `json:"events"`
	Answer string   `json:"answer"`
	Deltas int      `json:"deltas"`
}

// assertStreamed checks that the run streamed after the approval (at
// approvedAt on the page's clock). Its progress was shown as it came: step
// 2's start while the run went on, with no answer yet, at least most of a
// skill call before the run finished. Its answer was drawn from its
// chunks, in several pieces, each shown before the result was.
func assertStreamed(t *testing.T, log []exchangeSnapshot, order []string, approvedAt float64) {
	t.Helper()
	var progressAt, finishedAt float64 = -1, -1
	for _, s := range log {
		if s.T < approvedAt {
			continue
		}
		if progressAt < 0 && s.State != "finished" && s.Answer == "" && slices.Contains(s.Events, "step_2.started") {
			progressAt = s.T
		}
		if finishedAt < 0 && s.State == "finished" {
			finishedAt = s.T
		}
	}
	switch {
	case progressAt < 0 || finishedAt < 0:
		t.Errorf("after the approval: step 2's start shown at %.0f ms, the run finished at %.0f (-1: never); snapshots:\n%+v",
			progressAt, finishedAt, log)
	case finishedAt-progressAt < float64(skillLatency/time.Millisecond)*3/4:
		// Step 2's skill call takes skillLatency: its start was shown
		// while it ran, not all at once at the end.
		t.Errorf("step 2's start was shown %.0f ms before the run finished, less than its skill call takes", finishedAt-progressAt)
	}
	deltas := 0
	for _, o := range order {
		if o == "result" {
			break
		}
		deltas++
	}
	if deltas < 2 || !slices.Contains(order, "result") {
		t.Errorf("the answer was shown in %d pieces before the result, want several (the order shown: %v)", deltas, order)
	}
}

// browser is a tab of headless Chromium driven over the DevTools protocol.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts the system Chromium headless with a throwaway profile
// (no sandbox: the tests run as root) and opens a tab; the test's end
// closes it.
func newBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })
	// The browser and its tab start here, on the test's context: started
	// by an action's own shorter one, they would end with it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	return &browser{t: t, ctx: ctx}
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.transcript())
	}
}

// waitJS waits until the JavaScript expression is true on the page.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s: %v\n%s", what, err, b.transcript())
	}
}

// eval returns the value of a JavaScript expression, as a string.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return fmt.Sprint(v)
}

func (b *browser) text(sel string) string {
	return b.eval(`(function () { var n = document.querySelector(` + jsString(sel) + `); return n ? n.textContent : ''; })()`)
}

func (b *browser) attr(sel, name string) string {
	return b.eval(`(function () { var n = document.querySelector(` + jsString(sel) + `); return n ? (n.getAttribute(` +
		jsString(name) + `) || '') : ''; })()`)
}

// now is the page's clock, in ms (performance.now()).
func (b *browser) now() float64 {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.now()`))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// recordExchanges makes the page record every exchange of the
// playground at each change of it (a MutationObserver), so that the test
// can see when and in what order things were shown, however fast they
// came: a snapshot of each exchange after each batch of changes, and, in
// the order they were made, the pieces of the answer added and the
// result shown.
func (b *browser) recordExchanges() {
	b.t.Helper()
	b.do("record the exchanges", chromedp.Evaluate[chromedp.Void](`(function () {
		window.pgLog = {}; window.pgOrder = {};
		function exchangeOf(n) { while (n && !(n.classList && n.classList.contains('pg-exchange'))) n = n.parentNode; return n; }
		new MutationObserver(function (records) {
			records.forEach(function (r) {
				var x = exchangeOf(r.target);
				if (!x || r.type !== 'childList' || !r.addedNodes.length) return;
				var order = window.pgOrder[x.id] = window.pgOrder[x.id] || [];
				if (r.target.classList.contains('pg-result')) order.push('result');
				Array.prototype.forEach.call(r.addedNodes, function (n) { if (n.classList && n.classList.contains('pg-delta')) order.push('delta'); });
			});
			document.querySelectorAll('#pg-transcript .pg-exchange').forEach(function (x) {
				var msg = x.querySelector('.pg-answer-msg:not(.superseded)');
				(window.pgLog[x.id] = window.pgLog[x.id] || []).push({ t: performance.now(), state: x.getAttribute('data-state'),
					events: Array.prototype.map.call(x.querySelectorAll('.pg-progress li[data-event]'), function (li) { return li.getAttribute('data-event'); }),
					answer: msg ? msg.textContent : '', deltas: x.querySelectorAll('.pg-answer-msg:not(.superseded) .pg-delta').length });
			});
		}).observe(document.getElementById('pg-transcript'), { subtree: true, childList: true, attributes: true, characterData: true });
	})()`))
}

// exchangeLog returns the snapshots of exchange n, and the order in which
// the pieces of its answer ("delta") and its result ("result") were shown.
func (b *browser) exchangeLog(n int) ([]exchangeSnapshot, []string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	log, err := chromedp.Run(ctx, chromedp.Evaluate[[]exchangeSnapshot](fmt.Sprintf(`window.pgLog['pg-x%d'] || []`, n)))
	if err != nil {
		b.t.Fatal(err)
	}
	order, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`window.pgOrder['pg-x%d'] || []`, n)))
	if err != nil {
		b.t.Fatal(err)
	}
	return log, order
}

// transcript is the playground's text, for a failure's message.
func (b *browser) transcript() string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('pg-transcript') || {}).innerText + '\n' +
		(document.getElementById('errors') || {}).innerText`))
	if err != nil {
		return "(the page could not be read: " + err.Error() + ")"
	}
	return "the playground shows:\n" + v
}

// screenshot saves the page under the artifacts folder, for a human.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactsDir(b.t), name)
	if err := os.WriteFile(path, img, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("playground screenshot: %s (%d KiB)", path, len(img)>>10)
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`)
	return "'" + r.Replace(s) + "'"
}

// TestPlayground_AnswersAnElicitationInHeadlessChromium: against a plain
// MCP server whose book_table asks who the table is for (MCP
// elicitation), a question in the playground parks its run at an
// elicitation gate. The page draws the question's schema as a form (the
// name required, the party size with its default); answered there, the
// call is made again with the answer, defaults filled in, and the run
// ends SUCCESS.
func TestPlayground_AnswersAnElicitationInHeadlessChromium(t *testing.T) {
	chromium := findChromium(t)
	var mu sync.Mutex
	var booked []map[string]any
	srv := server.NewMCPServer("bookings", "1.0.0", server.WithToolCapabilities(false), server.WithElicitation())
	ask := mcp.ElicitationParams{Message: "Who is the table for, and how many guests?", RequestedSchema: map[string]any{
		"type": "object", "required": []string{"name"}, "properties": map[string]any{
			"name": map[string]any{"type": "string", "minLength": 1, "description": "the guest's name"},
			"size": map[string]any{"type": "integer", "minimum": 1, "default": 2}}}}
	srv.AddTool(mcp.NewTool("book_table", mcp.WithDescription("Book a table at the restaurant for tonight"),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false),
			OpenWorldHint: mcp.ToBoolPtr(false)})),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r, answered := req.Params.InputResponses["guest"]
			if !answered {
				return server.NewInputRequestBuilder("").Elicit("guest", ask).ToolResult(), nil
			}
			if err := r.DecodeFor(mcp.MethodElicitationCreate); err != nil || r.Elicitation == nil ||
				r.Elicitation.Action != mcp.ElicitationResponseActionAccept {
				return mcp.NewToolResultError("not booked: the guest did not say"), nil
			}
			guest, _ := r.Elicitation.Content.(map[string]any)
			mu.Lock()
			booked = append(booked, guest)
			mu.Unlock()
			return mcp.NewToolResultText(fmt.Sprintf("booked a table for %v, %v guests", guest["name"], guest["size"])), nil
		})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv, server.WithStreamableHTTPLogger(slog.New(slog.DiscardHandler))))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.StartStack(ctx, held(t, app.StackConfig{DataDir: t.TempDir(), NATSPort: -1, HTTPAddr: "127.0.0.1:0", SkillsURL: hs.URL + "/mcp",
		Log: zerolog.Nop(), Process: app.Config{AckWait: 2 * time.Second, SkillMode: skills.ModePlain}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)

	b := newBrowser(t, chromium)
	b.do("open the dashboard and ask", chromedp.Navigate("http://"+s.IngressAddr+"/dashboard?tenant=demo"),
		chromedp.WaitVisible(chromedp.ID("pg-question")),
		chromedp.SendKeys(chromedp.ID("pg-question"), "Book a table for tonight"), chromedp.Click(chromedp.ID("pg-ask")))
	b.waitJS("the question to be asked", `!!document.querySelector('#pg-x1 .pg-gate[data-status="open"] .pg-question-form')`)
	gate := b.text("#pg-x1 .pg-gate")
	if !strings.Contains(gate, "how many guests") || b.attr("#pg-x1 .pg-gate", "data-kind") != orch.GateElicitation {
		t.Fatalf("the gate does not ask the question:\n%s", gate)
	}
	if n := b.eval(`document.querySelectorAll('#pg-x1 .pg-question-form input').length`); n != "2" {
		t.Errorf("the question's form has %s fields, want name and size", n)
	}
	b.screenshot("playground-elicitation.png")
	// An empty answer is refused by its schema: the gate stays open.
	b.do("approve without a name", chromedp.Click(chromedp.CSS("#pg-x1 .pg-approve")))
	b.waitJS("the refusal", `document.querySelector('#pg-x1 .pg-gate-msg').textContent.indexOf('invalid_answer') >= 0`)
	if st := b.attr("#pg-x1 .pg-gate", "data-status"); st != "open" {
		t.Fatalf("the gate is %q after an answer its schema refuses", st)
	}
	b.do("answer", chromedp.SendKeys(chromedp.CSS(`#pg-x1 .pg-question-form input[name="name"]`), "Ada"),
		chromedp.Click(chromedp.CSS("#pg-x1 .pg-approve")))
	b.waitJS("the run to finish", `document.getElementById('pg-x1').getAttribute('data-state') === 'finished'`)
	if code := b.attr("#pg-x1", "data-terminal-code"); code != orch.CodeSuccess {
		t.Fatalf("the run ended %q:\n%s", code, b.text("#pg-x1"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(booked) != 1 || booked[0]["name"] != "Ada" || booked[0]["size"] != float64(2) {
		t.Fatalf("bookings %v, want one for Ada with the default size 2", booked)
	}
}
