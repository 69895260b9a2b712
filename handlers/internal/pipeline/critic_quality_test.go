package pipeline

import (
	"slices"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
)

// quality is a ReACT run whose executor calls outlet_list and then
// answers with answer, on each of its attempts; before the first call it
// answers early when early is set.
func quality(t *testing.T, early map[string]any, answer map[string]any) *llmtest.Scripted {
	t.Helper()
	m := llmtest.New()
	m.Default = offline.New()
	m.On(llm.TaskRoute, routeTo("research", router.PatternReact))
	var acts []llmtest.Reply
	if early != nil {
		acts = append(acts, llmtest.Reply{Response: handlerstest.ActAnswer(t, early)})
	}
	for i := range 2 {
		acts = append(acts, llmtest.Reply{Response: handlerstest.ToolCallResp("c"+string(rune('0'+i)), demo.SkillOutletList, `{"status":"active"}`)},
			llmtest.Reply{Response: handlerstest.ActAnswer(t, answer)})
	}
	m.On(llm.TaskAct, acts...)
	return m
}

// TestCritic_LowConfidenceGetsOneReflectionThenHalts: an answer whose
// stated confidence is below the threshold is not written; the step is
// replanned once (trigger low_confidence), and the same again ends the
// run LOW_CONFIDENCE with the confidence, the threshold and what the
// answer misses.
func TestCritic_LowConfidenceGetsOneReflectionThenHalts(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := patternFlow(t, env, quality(t, nil, map[string]any{"status": "complete", "label": "answer",
		"data": map[string]any{"answer": "o-1 ranks first"}, "confidence": 0.2, "reason": "engagement was not observed"}))
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-lowconf", events.TypeRunRequested, handlerstest.RunRequest("run-lowconf", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeLowConfidence || !strings.Contains(res.Reason, "engagement was not observed") ||
		!strings.Contains(res.Reason, "reflection pass") {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	var detail map[string]any
	if err := json.Unmarshal(res.Detail, &detail); err != nil || detail["confidence"] != 0.2 ||
		detail["threshold"] != orch.DefaultMinConfidence || detail["unmet"] != "engagement was not observed" {
		t.Fatalf("detail %s: %v", res.Detail, err)
	}
	if n := len(handlerstest.AuditPayloads(t, seen, "critic.low_confidence")); n != 2 {
		t.Errorf("%d low-confidence answers, want 2", n)
	}
	if r := handlerstest.AuditPayloads(t, seen, "replan.triggered"); len(r) != 1 || r[0]["trigger"] != orch.OutcomeLowConfidence {
		t.Errorf("replans %v, want one reflection pass", r)
	}
	if w := handlerstest.AuditPayloads(t, seen, "memory.written"); len(w) != 0 {
		t.Errorf("a low-confidence answer was written: %v", w)
	}
	if res.Decision == nil || res.Decision.Verdict != orch.VerdictEscalate || len(res.Decision.StepScores) == 0 ||
		res.Decision.StepScores[len(res.Decision.StepScores)-1].Scores["confidence"] != 0.2 {
		t.Errorf("decision %+v", res.Decision)
	}
}

// TestCritic_ConfidentAnswerIsAccepted: an answer at or above the
// threshold is written and scored with its confidence; a pattern's
// min_confidence raises the threshold.
func TestCritic_ConfidentAnswerIsAccepted(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	f := patternFlow(t, env, quality(t, nil, map[string]any{"status": "complete", "label": "answer",
		"data": map[string]any{"answer": "o-1 ranks first"}, "confidence": 0.9}))
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-conf", events.TypeRunRequested, handlerstest.RunRequest("run-conf", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	if len(handlerstest.AuditPayloads(t, seen, "memory.written")) != 1 || len(handlerstest.AuditPayloads(t, seen, "critic.low_confidence")) != 0 {
		t.Errorf("trace %v", traceNames(seen))
	}
	if res.Decision == nil || len(res.Decision.StepScores) != 1 || res.Decision.StepScores[0].Scores["confidence"] != 0.9 {
		t.Errorf("decision %+v", res.Decision)
	}

	// The pattern's own threshold, as the run recorded it, judges the
	// same answer.
	patterns := slices.Clone(router.DefaultPatterns)
	for i := range patterns {
		if patterns[i].Name == router.PatternReact {
			patterns[i].MinConfidence = 0.95
		}
	}
	b, _ := json.Marshal(patterns)
	if _, err := env.Config.Put(handlerstest.Ctx(t), router.ConfigKeyPatterns, b); err != nil {
		t.Fatal(err)
	}
	f = patternFlow(t, env, quality(t, nil, map[string]any{"status": "complete", "label": "answer",
		"data": map[string]any{"answer": "o-1 ranks first"}, "confidence": 0.9}))
	res, _ = f.drive(t, handlerstest.NewEvent(t, "run-strict", events.TypeRunRequested, handlerstest.RunRequest("run-strict", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeLowConfidence || !strings.Contains(res.Reason, "below 0.95") {
		t.Fatalf("under min_confidence 0.95 the run ended %s: %s", res.TerminalCode, res.Reason)
	}
}

// TestCritic_SourceConflictGetsOneCrossCheckThenHalts: a conflict the
// step did not observe is refused (the model is told to observe first);
// an observed one is not written, is cross-checked once (a replan,
// trigger source_conflict), and the same again ends the run
// SOURCE_CONFLICT with each source's claim as the evidence.
func TestCritic_SourceConflictGetsOneCrossCheckThenHalts(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	conflict := map[string]any{"status": "conflict", "reason": "the engagement of o-1",
		"conflicts": []map[string]any{{"source": "outlet_list", "claim": "o-1 has 12 followers"},
			{"source": "engagement", "claim": "o-1 has 14000 followers"}}}
	f := patternFlow(t, env, quality(t, conflict, conflict))
	res, seen := f.drive(t, handlerstest.NewEvent(t, "run-conflict", events.TypeRunRequested, handlerstest.RunRequest("run-conflict", handlerstest.RankTask)))
	if res.TerminalCode != orch.CodeSourceConflict || !strings.Contains(res.Reason, "the engagement of o-1") ||
		!strings.Contains(res.Reason, "cross-check pass") {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Reason)
	}
	var detail struct {
		Fact      string            `json:"fact"`
		Conflicts []llm.SourceClaim `json:"conflicts"`
	}
	if err := json.Unmarshal(res.Detail, &detail); err != nil || detail.Fact != "the engagement of o-1" || len(detail.Conflicts) != 2 ||
		detail.Conflicts[1].Claim != "o-1 has 14000 followers" {
		t.Fatalf("detail %s: %v", res.Detail, err)
	}
	refused := handlerstest.AuditPayloads(t, seen, "grounding.refused")
	if len(refused) != 1 || !strings.Contains(refused[0]["reason"].(string), "source conflict") {
		t.Errorf("grounding refusals %v, want the unobserved conflict's", refused)
	}
	if n := len(handlerstest.AuditPayloads(t, seen, "critic.source_conflict")); n != 2 {
		t.Errorf("%d conflicts reported, want 2", n)
	}
	if r := handlerstest.AuditPayloads(t, seen, "replan.triggered"); len(r) != 1 || r[0]["trigger"] != orch.OutcomeSourceConflict {
		t.Errorf("replans %v, want one cross-check pass", r)
	}
	if w := handlerstest.AuditPayloads(t, seen, "memory.written"); len(w) != 0 {
		t.Errorf("a conflicting answer was written: %v", w)
	}
}
