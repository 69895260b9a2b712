package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/handlers/tracedag"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// Each execution pattern has its own shape in the trace (issue 12): the
// tests below drive a whole run through the real role handlers, with a
// scripted model for the decisions that make the shape and the offline
// model for the rest.

// patternFlow is a flow whose every role answers with model.
func patternFlow(t *testing.T, env *handlerstest.Env, model llm.Model) *flow {
	t.Helper()
	f := newFlow(t, env, env.Store)
	f.router.Model, f.planner.Model, f.exec.Model = model, model, model
	return f
}

// routeTo is a routing answer choosing taskType and pattern.
func routeTo(taskType, pattern string) llmtest.Reply {
	return llmtest.Reply{Response: handlerstest.TextResp(fmt.Sprintf(`{"task_type":%q,"pattern":%q,"reason":"scripted"}`, taskType, pattern))}
}

// traceNames are the audit names of the events a drive handled, in order.
func traceNames(seen []event.Event) []string { return handlerstest.AuditNames(seen) }

// loopAnswer is a loop's final turn: its answer.
func loopAnswer(t *testing.T, answer string) llmtest.Reply {
	return llmtest.Reply{Response: handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "answer",
		"data": map[string]any{"answer": answer}})}
}

// actTurns counts the model.called audits of executor turns.
func actTurns(t *testing.T, seen []event.Event) int {
	n := 0
	for _, p := range handlerstest.AuditPayloads(t, seen, "model.called") {
		if p["task"] == string(llm.TaskAct) {
			n++
		}
	}
	return n
}

func TestPattern_ReactIsOneLoopOfTurnsWithNoPlan(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
	model.On(llm.TaskAct,
		llmtest.Reply{Response: handlerstest.ToolCallResp("c1", demo.SkillOutletList, `{"status":"active"}`)},
		llmtest.Reply{Response: handlerstest.ToolCallResp("c2", demo.SkillOutletList, `{"status":"inactive"}`)},
		llmtest.Reply{Response: handlerstest.ToolCallResp("c3", demo.SkillOutletList, `{}`)},
		loopAnswer(t, "12 outlets, 9 of them active"),
	)
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-react", events.TypeRunRequested, handlerstest.RunRequest("run-react", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	names := traceNames(seen)
	for _, banned := range []string{"plan.received", "plan.revised", "fanout.started"} {
		if slices.Contains(names, banned) {
			t.Errorf("a ReACT run's trace has %s: %v", banned, names)
		}
	}
	if !slices.Contains(names, "react.started") {
		t.Fatalf("no react.started in the trace: %v", names)
	}
	if n := len(handlerstest.OfType(seen, events.TypeStepIterated)); n != 3 {
		t.Errorf("%d step.iterated turns, want 3 (one per tool call)", n)
	}
	if n := actTurns(t, seen); n != 4 {
		t.Errorf("%d executor model turns, want 4", n)
	}
	if len(res.Steps) != 1 || res.Steps[0].Loop == nil || res.Steps[0].Task != handlerstest.RankTask {
		t.Fatalf("a ReACT run has one loop step over the task; steps: %+v", res.Steps)
	}
	// The loop may call only the skills the planner discovered for it.
	if !slices.Contains(res.Steps[0].Skills, demo.SkillOutletList) {
		t.Fatalf("the loop's allowed skills %v lack %s", res.Steps[0].Skills, demo.SkillOutletList)
	}
	for _, req := range model.Requests() {
		if req.Task == llm.TaskPlan {
			t.Fatal("a ReACT run asked the model for a plan")
		}
	}
}

func TestPattern_PlanThenExecuteRunsIndependentStepsAsOneParallelGroup(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("general", router.PatternPlanThenExecute))
	plan := fmt.Sprintf(`{"steps":[
		{"step":1,"task":"List the active outlets","skills":[%[1]q],"return_spec":{"shape":%[3]s,"reason":"ids to rank"}},
		{"step":2,"task":"List the inactive outlets","skills":[%[1]q],"return_spec":{"shape":%[3]s,"reason":"ids to compare"}},
		{"step":3,"task":"Rank the active outlets by engagement","skills":[%[2]q],"return_spec":{"shape":%[4]s,"reason":"the answer"},"depends_on":[1]}]}`,
		demo.SkillOutletList, demo.SkillEngagementAnalytics, handlerstest.OutletIDsShape, handlerstest.ResultsShape)
	model.On(llm.TaskPlan, llmtest.Reply{Response: handlerstest.TextResp(plan)})
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-dag", events.TypeRunRequested, handlerstest.RunRequest("run-dag", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	groups := map[string][]int{}
	for _, ev := range handlerstest.OfType(seen, events.TypeStepRequested) {
		sr := handlerstest.Decode[orch.StepRequest](t, ev)
		groups[sr.Group.ID] = append(groups[sr.Group.ID], sr.Step)
	}
	var parallel []int
	for _, steps := range groups {
		if len(steps) > 1 {
			parallel = steps
		}
	}
	slices.Sort(parallel)
	if !slices.Equal(parallel, []int{1, 2}) || len(groups) != 2 {
		t.Fatalf("groups %v: want steps 1 and 2 in one parallel group, step 3 after", groups)
	}
	if n := len(handlerstest.OfType(seen, events.TypeGroupJoined)); n != 1 {
		t.Fatalf("%d group.joined, want the aggregator's one join of the parallel group", n)
	}
	if j := handlerstest.AuditPayloads(t, seen, "fanin.joined"); len(j) != 1 || j[0]["expected_siblings"] != 2.0 {
		t.Fatalf("fanin.joined audits %v", j)
	}
	if !slices.Contains(traceNames(seen), "plan.received") {
		t.Fatal("a plan-then-execute run's trace has no plan.received")
	}
}

func TestPattern_SupervisorFansOutLanesAndJoinsOnce(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("risk-assessment", router.PatternSupervisor))
	goals := []string{"List the active outlets", "List the inactive outlets", "List every outlet"}
	lanes := make([]llm.LaneGoal, len(goals))
	for i, g := range goals {
		lanes[i] = llm.LaneGoal{Goal: g, Skills: []string{demo.SkillOutletList}}
	}
	b, _ := json.Marshal(llm.SuperviseOutput{Lanes: lanes})
	model.On(llm.TaskSupervise, llmtest.Reply{Response: handlerstest.TextResp(string(b))})
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-sup", events.TypeRunRequested,
		handlerstest.RunRequest("run-sup", "Assess the outlets' risk across their active, inactive and overall status")))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	fan := handlerstest.AuditPayloads(t, seen, "fanout.started")
	if len(fan) != 1 {
		t.Fatalf("%d fanout.started, want 1", len(fan))
	}
	recorded, _ := fan[0]["lanes"].([]any)
	sessions := map[string]bool{}
	for _, l := range recorded {
		lane := l.(map[string]any)
		sessions[lane["session_id"].(string)] = true
		if lane["session_id"] == handlerstest.Session {
			t.Errorf("lane %v shares its parent's session", lane)
		}
	}
	if len(recorded) != 3 || len(sessions) != 3 || fan[0]["expected_siblings"] != 3.0 || fan[0]["parent_session_id"] != handlerstest.Session {
		t.Fatalf("fan-out %v: want 3 lanes with their own sessions", fan[0])
	}
	corr := fan[0]["correlation_id"]
	var laneGroups []string
	for _, ev := range handlerstest.OfType(seen, events.TypeStepRequested) {
		sr := handlerstest.Decode[orch.StepRequest](t, ev)
		laneGroups = append(laneGroups, sr.Group.ID)
		if sr.Group.Expected != 3 {
			t.Errorf("lane %d expects %d siblings, want 3", sr.Step, sr.Group.Expected)
		}
	}
	if len(laneGroups) != 3 || slices.ContainsFunc(laneGroups, func(g string) bool { return g != corr }) {
		t.Fatalf("lanes were dispatched in groups %v, want 3 under correlation id %v", laneGroups, corr)
	}
	if n := len(handlerstest.OfType(seen, events.TypeGroupJoined)); n != 1 {
		t.Fatalf("%d group.joined, want one join of the 3 lanes", n)
	}
	syn := handlerstest.AuditPayloads(t, seen, "synthesis.started")
	if from, _ := syn[0]["derived_from"].([]any); len(syn) != 1 || len(from) != 3 {
		t.Fatalf("synthesis provenance %v: want one synthesis derived from the 3 lanes", syn)
	}
	for i, g := range goals {
		if !strings.Contains(res.Response, fmt.Sprintf("Lane %d — %s", i+1, g)) {
			t.Errorf("the answer does not report lane %d (%s):\n%s", i+1, g, res.Response)
		}
	}
	if slices.Contains(traceNames(seen), "plan.received") {
		t.Error("a supervisor run's trace has a plan.received")
	}
}

// The supervisor reviews its lanes' findings before answering (seed
// 001's re-iteration): findings with gaps fan out again, with only new
// lanes (the answered ones are not re-run) and the gaps shown to the
// decomposition; the next review's "sufficient" gets the answer. The
// record re-derives the run.
func TestPattern_SupervisorReiteratesWhenItsReviewFindsGaps(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("risk-assessment", router.PatternSupervisor))
	decompose := func(goals ...string) llmtest.Reply {
		lanes := make([]llm.LaneGoal, len(goals))
		for i, g := range goals {
			lanes[i] = llm.LaneGoal{Goal: g, Skills: []string{demo.SkillOutletList}}
		}
		b, _ := json.Marshal(llm.SuperviseOutput{Lanes: lanes})
		return llmtest.Reply{Response: handlerstest.TextResp(string(b))}
	}
	model.On(llm.TaskSupervise, decompose("List the active outlets", "List the inactive outlets"), decompose("List every outlet"))
	model.On(llm.TaskReview, llmtest.Reply{Response: handlerstest.TextResp(`{"sufficient":false,"gaps":"no overall view of the outlets"}`)},
		llmtest.Reply{Response: handlerstest.TextResp(`{"sufficient":true}`)})
	f := patternFlow(t, env, model)
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-sup-re", events.TypeRunRequested,
		handlerstest.RunRequest("run-sup-re", "Assess the outlets' risk across their active, inactive and overall status")))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	reviews := handlerstest.AuditPayloads(t, seen, "supervisor.reviewed")
	if len(reviews) != 2 || reviews[0]["sufficient"] != false || reviews[0]["gaps"] != "no overall view of the outlets" ||
		reviews[1]["sufficient"] != true || reviews[1]["iteration"] != 2.0 {
		t.Fatalf("reviews %v: want gaps, then sufficient at iteration 2", reviews)
	}
	if re := handlerstest.AuditPayloads(t, seen, "supervisor.reiterated"); len(re) != 1 {
		t.Fatalf("%d supervisor.reiterated, want 1", len(re))
	}
	sup := model.Requests(llm.TaskSupervise)
	if len(sup) != 2 {
		t.Fatalf("%d decompositions, want 2", len(sup))
	}
	if in := sup[1].Input.(llm.SuperviseInput); in.Gaps != "no overall view of the outlets" || len(in.Completed) != 2 {
		t.Fatalf("the second decomposition saw gaps %q and %d completed lanes, want the review's gaps and 2", in.Gaps, len(in.Completed))
	}
	// Each lane ran once: the answered lanes were kept, not re-run.
	if n := len(handlerstest.OfType(seen, events.TypeStepRequested)); n != 3 {
		t.Fatalf("%d lanes dispatched, want 2 then 1", n)
	}
	if rv := model.Requests(llm.TaskReview); len(rv) != 2 || len(rv[1].Input.(llm.ReviewInput).Outputs) != 3 {
		t.Fatalf("%d reviews; the second must see the 3 lanes' findings", len(rv))
	}
	for i, g := range []string{"List the active outlets", "List the inactive outlets", "List every outlet"} {
		if !strings.Contains(res.Response, fmt.Sprintf("Lane %d — %s", i+1, g)) {
			t.Errorf("the answer does not report lane %d (%s):\n%s", i+1, g, res.Response)
		}
	}
	if rep := runctl.ReplayRun("run-sup-re", seen, runctl.ReplayControls{}); rep.Decisions == 0 || len(rep.Divergences) != 0 {
		t.Fatalf("replay: %d decisions, divergences %+v", rep.Decisions, rep.Divergences)
	}
}

func TestPattern_SupervisorRejectsLanesOutsideTheDiscoveredSkills(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("risk-assessment", router.PatternSupervisor))
	model.On(llm.TaskSupervise,
		llmtest.Reply{Response: handlerstest.TextResp(`{"lanes":[{"goal":"wire money","skills":["bank_transfer"]}]}`)},
		llmtest.Reply{Response: handlerstest.TextResp(fmt.Sprintf(`{"lanes":[{"goal":"List the active outlets","skills":[%q]}]}`, demo.SkillOutletList))})
	f := patternFlow(t, env, model)
	res, _ := f.drive(t, handlerstest.NewEvent(t, "run-sup-bad", events.TypeRunRequested, handlerstest.RunRequest("run-sup-bad", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess || len(res.Steps) != 1 || res.Steps[0].Skills[0] != demo.SkillOutletList {
		t.Fatalf("run ended %s with steps %+v: want the repaired lane only", res.TerminalCode, res.Steps)
	}
	var repairs int
	for _, req := range model.Requests() {
		if req.Task == llm.TaskSupervise && strings.Contains(handlerstest.LastMessage(req), `"bank_transfer", which is not in the skills list`) {
			repairs++
		}
	}
	if repairs != 1 {
		t.Fatalf("the supervisor was told of the unknown skill %d times, want 1", repairs)
	}
}

func TestPattern_LongReactLoopKeepsItsMessagesBounded(t *testing.T) {
	wholeRun(t)
	const turns = 200
	env := handlerstest.NewEnv(t)
	patterns := slices.Clone(router.DefaultPatterns)
	for i := range patterns {
		if patterns[i].Name == router.PatternReact {
			patterns[i].MaxIterations = turns + 1
		}
	}
	b, _ := json.Marshal(patterns)
	if _, err := env.Config.Put(handlerstest.Ctx(t), router.ConfigKeyPatterns, b); err != nil {
		t.Fatal(err)
	}
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("research", router.PatternReact))
	for i := range turns - 1 {
		status := []string{"active", "inactive"}[i%2]
		model.On(llm.TaskAct, llmtest.Reply{Response: handlerstest.ToolCallResp(fmt.Sprintf("c%d", i), demo.SkillOutletList, fmt.Sprintf(`{"status":%q}`, status))})
	}
	model.On(llm.TaskAct, loopAnswer(t, "done"))
	f := patternFlow(t, env, model)
	f.maxEvents = 20 * turns
	f.exec.RepeatCallLimit = turns // the loop alternates two calls on purpose
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-long", events.TypeRunRequested, handlerstest.RunRequest("run-long", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	iterated := handlerstest.OfType(seen, events.TypeStepIterated)
	if len(iterated) != turns-1 {
		t.Fatalf("%d step.iterated, want %d", len(iterated), turns-1)
	}
	// The bound: the run state, the loop's summary turn and its KeepTurns
	// recent turns. It holds at turn 20 and at turn 199 alike.
	const bound = 8 << 10
	largest, early := 0, 0
	for i, ev := range iterated {
		n := len(ev.Data())
		largest = max(largest, n)
		if i < 20 {
			early = max(early, n)
		}
	}
	t.Logf("turn messages: largest %d bytes, largest of the first 20 %d", largest, early)
	if largest > bound {
		t.Fatalf("the largest turn message is %d bytes, over the %d-byte bound", largest, bound)
	}
	if largest > early+early/10 {
		t.Fatalf("turn messages grew from %d bytes in the first 20 turns to %d", early, largest)
	}
	last := handlerstest.Decode[orch.StepRequest](t, iterated[len(iterated)-1])
	if last.Iteration != turns-1 || last.Turns[0].Role != "summary" || len(last.Turns) > f.exec.KeepTurns+1 {
		t.Fatalf("turn %d carries %d turns (first %q): want a summary and at most %d recent", last.Iteration, len(last.Turns), last.Turns[0].Role, f.exec.KeepTurns)
	}
}

// The supervisor run's trace folds into its provenance DAG: routing, the
// decomposition, one group with the three lanes, and the synthesis derived
// from all three.
func TestPattern_SupervisorTraceIsADAG(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	model := llmtest.New()
	model.Default = offline.New()
	model.On(llm.TaskRoute, routeTo("risk-assessment", router.PatternSupervisor))
	lanes := []llm.LaneGoal{{Goal: "List the active outlets", Skills: []string{demo.SkillOutletList}},
		{Goal: "List the inactive outlets", Skills: []string{demo.SkillOutletList}},
		{Goal: "List every outlet", Skills: []string{demo.SkillOutletList}}}
	b, _ := json.Marshal(llm.SuperviseOutput{Lanes: lanes})
	model.On(llm.TaskSupervise, llmtest.Reply{Response: handlerstest.TextResp(string(b))})
	f := patternFlow(t, env, model)
	res, _ := f.drive(t, handlerstest.NewEvent(t, "run-dag2", events.TypeRunRequested, handlerstest.RunRequest("run-dag2", "Assess the outlets across dimensions")))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	evs, err := env.Store.Trace(handlerstest.Ctx(t), store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: res.PlanID})
	if err != nil {
		t.Fatal(err)
	}
	dag := tracedag.Build(evs)
	kinds := map[string][]string{}
	for _, n := range dag.Nodes {
		kinds[n.Kind] = append(kinds[n.Kind], n.ID)
	}
	if len(kinds["routing"]) != 1 || len(kinds["plan"]) != 1 || len(kinds["group"]) != 1 || len(kinds["step"]) != 3 ||
		len(kinds["review"]) != 1 || len(kinds["synthesis"]) != 1 || len(kinds["answer"]) != 1 {
		t.Fatalf("nodes by kind %v", kinds)
	}
	parents := map[string][]string{}
	for _, e := range dag.Edges {
		parents[e.To] = append(parents[e.To], e.From)
	}
	group := kinds["group"][0]
	for _, s := range kinds["step"] {
		if !slices.Equal(parents[s], []string{group}) {
			t.Errorf("lane %s derives from %v, want the group %s", s, parents[s], group)
		}
	}
	if !slices.Equal(parents[group], kinds["plan"]) || !slices.Equal(parents[kinds["plan"][0]], []string{"routing"}) {
		t.Errorf("group from %v, plan from %v", parents[group], parents[kinds["plan"][0]])
	}
	syn := parents["synthesis"]
	if review := kinds["review"][0]; !slices.Contains(syn, review) || !slices.Equal(parents[review], []string{group}) {
		t.Errorf("the review derives from %v and the synthesis from %v: want group, review, synthesis", parents[review], syn)
	}
	for _, s := range kinds["step"] {
		if !slices.Contains(syn, s) {
			t.Errorf("the synthesis does not derive from lane %s: %v", s, syn)
		}
	}
}
