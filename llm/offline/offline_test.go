package offline_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
)

const rankTask = "List the active outlets and rank them by engagement"

// outletIDsShape is the return_spec a consumer of outlet ids asks for.
const outletIDsShape = `{"type":"object","properties":{"outlet_ids":{"type":"array","items":{"type":"string"}}},"required":["outlet_ids"]}`

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The demo manifests are loaded once per test binary.
var (
	demoMu    sync.Mutex
	demoInfos map[string]llm.SkillInfo
)

// demoSkills loads every public demo manifest through the real demo Skill
// Service and a real MCP client.
func demoSkills(t *testing.T) map[string]llm.SkillInfo {
	t.Helper()
	demoMu.Lock()
	defer demoMu.Unlock()
	if demoInfos != nil {
		return demoInfos
	}
	svc := demo.NewService(demo.Config{})
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	c, err := skills.NewClient(skills.Config{URL: srv.URL + "/tenants/{tenant}/mcp"})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer func() { _ = c.Close() }()
	ctx := testCtx(t)
	infos := map[string]llm.SkillInfo{}
	for _, name := range []string{demo.SkillOutletList, demo.SkillEngagementAnalytics, demo.SkillMenuCatalog} {
		m, err := c.Load(ctx, "beta", name)
		if err != nil {
			t.Fatalf("Load(%s): %v", name, err)
		}
		infos[name] = llm.SkillInfo{Name: m.Name, Description: m.Description, InputSchema: m.InputSchema, OutputSchema: m.OutputSchema}
	}
	demoInfos = infos
	return infos
}

func allDemo(t *testing.T) []llm.SkillInfo {
	m := demoSkills(t)
	return []llm.SkillInfo{m[demo.SkillMenuCatalog], m[demo.SkillEngagementAnalytics], m[demo.SkillOutletList]}
}

// complete runs the offline model on input and returns its message.
func complete(t *testing.T, task llm.Task, input any, history []llm.Message) llm.Message {
	t.Helper()
	resp, err := offline.New().Complete(testCtx(t), llm.Request{Task: task, Input: input, Messages: history})
	if err != nil {
		t.Fatalf("Complete(%s): %v", task, err)
	}
	if resp.Model != "offline" {
		t.Errorf("Model = %q, want offline", resp.Model)
	}
	if resp.Usage.InputTokens <= 0 || resp.Usage.OutputTokens <= 0 {
		t.Errorf("Usage = %+v, want positive estimates", resp.Usage)
	}
	return resp.Message
}

func offlinePlan(t *testing.T, in llm.PlanInput) llm.PlanOutput {
	t.Helper()
	msg := complete(t, llm.TaskPlan, in, nil)
	if err := schema.Validate(llm.PlanSchema, []byte(msg.Content)); err != nil {
		t.Fatalf("offline plan does not match PlanSchema: %v\n%s", err, msg.Content)
	}
	var out llm.PlanOutput
	if err := json.Unmarshal([]byte(msg.Content), &out); err != nil {
		t.Fatalf("decode plan: %v", err)
	}
	return out
}

func TestOfflinePlanChainsOutletListIntoEngagement(t *testing.T) {
	cases := []struct {
		name      string
		first     int
		wantFirst int
	}{
		{"fresh plan", 0, 1},
		{"fresh plan explicit first", 1, 1},
		{"replan numbered from FirstStep", 3, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := offlinePlan(t, llm.PlanInput{Task: rankTask, Skills: allDemo(t), MaxSteps: 10, FirstStep: tc.first})
			if out.Infeasible != "" {
				t.Fatalf("Infeasible = %q", out.Infeasible)
			}
			if len(out.Steps) != 2 {
				t.Fatalf("got %d steps, want 2: %+v", len(out.Steps), out.Steps)
			}
			s1, s2 := out.Steps[0], out.Steps[1]
			if s1.Step != tc.wantFirst || s2.Step != tc.wantFirst+1 {
				t.Errorf("step numbers = %d, %d; want %d, %d", s1.Step, s2.Step, tc.wantFirst, tc.wantFirst+1)
			}
			if !slices.Equal(s1.Skills, []string{demo.SkillOutletList}) {
				t.Errorf("step 1 skills = %v, want [outlet_list]", s1.Skills)
			}
			if !slices.Equal(s2.Skills, []string{demo.SkillEngagementAnalytics}) {
				t.Errorf("step 2 skills = %v, want [engagement_analytics]", s2.Skills)
			}
			if len(s1.DependsOn) != 0 {
				t.Errorf("step 1 depends on %v, want nothing", s1.DependsOn)
			}
			if !slices.Equal(s2.DependsOn, []int{tc.wantFirst}) {
				t.Errorf("step 2 depends on %v, want [%d]", s2.DependsOn, tc.wantFirst)
			}
			shape, err := schema.ParseShape(s1.ReturnSpec.Shape)
			if err != nil {
				t.Fatalf("step 1 shape: %v", err)
			}
			if !slices.Equal(shape.Required, []string{"outlet_ids"}) {
				t.Errorf("step 1 shape requires %v, want [outlet_ids]", shape.Required)
			}
			if p := shape.Properties["outlet_ids"]; p.Type != "array" || p.Items == nil || p.Items.Type != "string" {
				t.Errorf("step 1 outlet_ids = %+v, want array of string", p)
			}
			if !strings.Contains(s1.ReturnSpec.Reason, "engagement_analytics needs outlet_ids") {
				t.Errorf("step 1 reason = %q", s1.ReturnSpec.Reason)
			}
			// The final step returns the whole skill output.
			final, err := schema.ParseShape(s2.ReturnSpec.Shape)
			if err != nil {
				t.Fatalf("step 2 shape: %v", err)
			}
			if _, ok := final.Properties["results"]; !ok {
				t.Errorf("step 2 shape %s lacks results", s2.ReturnSpec.Shape)
			}
			if !strings.Contains(s2.Task, rankTask) {
				t.Errorf("step 2 task %q does not carry the user task", s2.Task)
			}
		})
	}
}

func TestOfflinePlanInfeasible(t *testing.T) {
	cases := []struct {
		name string
		in   llm.PlanInput
		want string
	}{
		{"unrelated task", llm.PlanInput{Task: "bake a cake", MaxSteps: 10}, "no discovered skill fits"},
		{"no skills", llm.PlanInput{Task: rankTask, MaxSteps: 10}, "no discovered skill fits"},
		{"too many steps", llm.PlanInput{Task: rankTask, MaxSteps: 1}, "more than the limit of 1"},
		{"producer missing", llm.PlanInput{Task: "rank outlets by engagement", MaxSteps: 10}, `needs "outlet_ids"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			switch tc.name {
			case "unrelated task", "too many steps":
				in.Skills = allDemo(t)
			case "producer missing":
				in.Skills = []llm.SkillInfo{demoSkills(t)[demo.SkillEngagementAnalytics]}
			}
			out := offlinePlan(t, in)
			if len(out.Steps) != 0 {
				t.Errorf("got %d steps, want none", len(out.Steps))
			}
			if !strings.Contains(out.Infeasible, tc.want) {
				t.Errorf("Infeasible = %q, want it to contain %q", out.Infeasible, tc.want)
			}
		})
	}
}

func actOut(t *testing.T, msg llm.Message) llm.ActOutput {
	t.Helper()
	if len(msg.ToolCalls) != 0 {
		t.Fatalf("got tool calls %+v, want a final answer", msg.ToolCalls)
	}
	if err := schema.Validate(llm.ActSchema, []byte(msg.Content)); err != nil {
		t.Fatalf("answer does not match ActSchema: %v\n%s", err, msg.Content)
	}
	var a llm.ActOutput
	if err := json.Unmarshal([]byte(msg.Content), &a); err != nil {
		t.Fatalf("decode answer: %v", err)
	}
	return a
}

func TestOfflineActCallsAllowedSkill(t *testing.T) {
	sk := demoSkills(t)
	cases := []struct {
		name     string
		in       llm.ActInput
		wantTool string
		wantArgs string
	}{
		{
			name: "status from task",
			in: llm.ActInput{Task: rankTask, Skills: []llm.SkillInfo{sk[demo.SkillOutletList]},
				ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(outletIDsShape)}},
			wantTool: demo.SkillOutletList, wantArgs: `{"status":"active"}`,
		},
		{
			name: "inactive status",
			in: llm.ActInput{Task: "list the inactive outlets", Skills: []llm.SkillInfo{sk[demo.SkillOutletList]},
				ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(outletIDsShape)}},
			wantTool: demo.SkillOutletList, wantArgs: `{"status":"inactive"}`,
		},
		{
			name: "no argument available",
			in: llm.ActInput{Task: "list outlets", Skills: []llm.SkillInfo{sk[demo.SkillOutletList]},
				ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(outletIDsShape)}},
			wantTool: demo.SkillOutletList, wantArgs: `{}`,
		},
		{
			name: "outlet ids from input memory",
			in: llm.ActInput{Task: "rank outlets by engagement", Skills: []llm.SkillInfo{sk[demo.SkillEngagementAnalytics]},
				ReturnSpec: llm.ReturnSpec{Shape: sk[demo.SkillEngagementAnalytics].OutputSchema},
				Inputs:     map[string]json.RawMessage{"t:s:task-1:outlet_ids": json.RawMessage(`{"outlet_ids":["out-001","out-004"]}`)}},
			wantTool: demo.SkillEngagementAnalytics, wantArgs: `{"outlet_ids":["out-001","out-004"]}`,
		},
		{
			name: "outlet ids projected from a list of outlets",
			in: llm.ActInput{Task: "rank outlets by engagement", Skills: []llm.SkillInfo{sk[demo.SkillEngagementAnalytics]},
				ReturnSpec: llm.ReturnSpec{Shape: sk[demo.SkillEngagementAnalytics].OutputSchema},
				Inputs: map[string]json.RawMessage{"t:s:task-1:outlets": json.RawMessage(
					`{"outlets":[{"outlet_id":"out-002","name":"Central Station"},{"outlet_id":"out-005","name":"Market Lane"}]}`)}},
			wantTool: demo.SkillEngagementAnalytics, wantArgs: `{"outlet_ids":["out-002","out-005"]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := complete(t, llm.TaskAct, tc.in, nil)
			if msg.Role != llm.RoleAssistant {
				t.Errorf("Role = %q, want assistant", msg.Role)
			}
			if len(msg.ToolCalls) != 1 {
				t.Fatalf("got %d tool calls (content %q), want 1", len(msg.ToolCalls), msg.Content)
			}
			c := msg.ToolCalls[0]
			if c.Name != tc.wantTool {
				t.Errorf("tool = %q, want %q", c.Name, tc.wantTool)
			}
			if c.ID == "" {
				t.Error("tool call has no id")
			}
			assertJSONEqual(t, c.Arguments, tc.wantArgs)
		})
	}
}

func TestOfflineActAnswers(t *testing.T) {
	sk := demoSkills(t)
	outlets := `{"outlets":[{"outlet_id":"out-001","name":"Harbour Front","city":"Sydney","status":"active"},` +
		`{"outlet_id":"out-002","name":"Central Station","city":"Melbourne","status":"active"}]}`
	call := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call-1", Name: demo.SkillOutletList, Arguments: json.RawMessage(`{"status":"active"}`)}}}
	listStep := llm.ActInput{Task: rankTask, Skills: []llm.SkillInfo{sk[demo.SkillOutletList]},
		ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(outletIDsShape)}}
	cases := []struct {
		name           string
		in             llm.ActInput
		history        []llm.Message
		wantStatus     string
		wantLabel      string
		wantData       string
		wantReason     string
		wantSuggestion string
	}{
		{
			name: "result projected to return_spec", in: listStep,
			history:    []llm.Message{call, {Role: llm.RoleTool, ToolCallID: "call-1", Content: outlets}},
			wantStatus: "complete", wantLabel: "outlet_ids", wantData: `{"outlet_ids":["out-001","out-002"]}`,
		},
		{
			name: "whole output for a final step",
			in: llm.ActInput{Task: rankTask, Skills: []llm.SkillInfo{sk[demo.SkillOutletList]},
				ReturnSpec: llm.ReturnSpec{Shape: sk[demo.SkillOutletList].OutputSchema}},
			history:    []llm.Message{call, {Role: llm.RoleTool, ToolCallID: "call-1", Content: outlets}},
			wantStatus: "complete", wantLabel: "outlets", wantData: outlets,
		},
		{
			name: "tool error", in: listStep,
			history:    []llm.Message{call, {Role: llm.RoleTool, ToolCallID: "call-1", Content: "transient failure (injected)", IsError: true}},
			wantStatus: "failed", wantReason: "transient failure (injected)", wantSuggestion: "retry the step",
		},
		{
			name: "tool result is not an object", in: listStep,
			history:    []llm.Message{call, {Role: llm.RoleTool, ToolCallID: "call-1", Content: `[1,2]`}},
			wantStatus: "failed", wantReason: "not a JSON object",
		},
		{
			name: "return_spec not derivable from the skill",
			in: llm.ActInput{Task: rankTask, Skills: []llm.SkillInfo{sk[demo.SkillOutletList]},
				ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(`{"type":"object","properties":{"revenue":{"type":"number"}}}`)}},
			history:    []llm.Message{call, {Role: llm.RoleTool, ToolCallID: "call-1", Content: outlets}},
			wantStatus: "insufficient", wantReason: "revenue",
		},
		{
			name: "missing required input",
			in: llm.ActInput{Task: "rank outlets by engagement", Skills: []llm.SkillInfo{sk[demo.SkillEngagementAnalytics]},
				ReturnSpec: llm.ReturnSpec{Shape: sk[demo.SkillEngagementAnalytics].OutputSchema}},
			wantStatus: "insufficient", wantReason: `needs "outlet_ids"`,
			wantSuggestion: "add a step before this one that produces outlet_ids",
		},
		{
			name:       "no allowed skill",
			in:         llm.ActInput{Task: rankTask, ReturnSpec: llm.ReturnSpec{Shape: json.RawMessage(outletIDsShape)}},
			wantStatus: "insufficient", wantReason: "no allowed skill",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := actOut(t, complete(t, llm.TaskAct, tc.in, tc.history))
			if a.Status != tc.wantStatus {
				t.Fatalf("Status = %q (reason %q), want %q", a.Status, a.Reason, tc.wantStatus)
			}
			if a.Label != tc.wantLabel {
				t.Errorf("Label = %q, want %q", a.Label, tc.wantLabel)
			}
			if tc.wantData != "" {
				assertJSONEqual(t, a.Data, tc.wantData)
				if err := schema.Validate(tc.in.ReturnSpec.Shape, a.Data); err != nil {
					t.Errorf("data does not satisfy the return_spec: %v", err)
				}
			} else if len(a.Data) != 0 {
				t.Errorf("Data = %s, want none", a.Data)
			}
			if !strings.Contains(a.Reason, tc.wantReason) {
				t.Errorf("Reason = %q, want it to contain %q", a.Reason, tc.wantReason)
			}
			if tc.wantSuggestion != "" && a.Suggestion != tc.wantSuggestion {
				t.Errorf("Suggestion = %q, want %q", a.Suggestion, tc.wantSuggestion)
			}
			if a.Status != "complete" && a.Suggestion == "" {
				t.Error("a non-complete answer carries no suggestion")
			}
		})
	}
}

func TestOfflineRoute(t *testing.T) {
	tts := []llm.TaskType{
		{Name: "general", Description: "list, rank, look up and combine data from skills", Patterns: []string{"plan-then-execute", "react"}},
		{Name: "research", Description: "open-ended investigation of a question", Patterns: []string{"react", "plan-then-execute"}},
		{Name: "summarisation", Description: "condense or summarise information", Patterns: []string{"react"}},
		{Name: "bare", Description: "weather forecast lookups"},
	}
	cases := []struct {
		name        string
		task        string
		tts         []llm.TaskType
		wantType    string
		wantPattern string
	}{
		{"rank task", rankTask, tts, "general", "plan-then-execute"},
		{"investigation", "investigation of why sales dropped", tts, "research", "react"},
		{"summary", "please condense this information", tts, "summarisation", "react"},
		{"type without patterns", "weather forecast for Sydney", tts, "bare", "react"},
		{"no task types", rankTask, nil, "general", "react"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := complete(t, llm.TaskRoute, llm.RouteInput{Task: tc.task, TaskTypes: tc.tts}, nil)
			if err := schema.Validate(llm.RouteSchema, []byte(msg.Content)); err != nil {
				t.Fatalf("route does not match RouteSchema: %v", err)
			}
			var out llm.RouteOutput
			if err := json.Unmarshal([]byte(msg.Content), &out); err != nil {
				t.Fatal(err)
			}
			if out.TaskType != tc.wantType || out.Pattern != tc.wantPattern {
				t.Errorf("route = %s/%s, want %s/%s", out.TaskType, out.Pattern, tc.wantType, tc.wantPattern)
			}
			if out.Reason == "" {
				t.Error("route has no reason")
			}
			if i := slices.IndexFunc(tc.tts, func(tt llm.TaskType) bool { return tt.Name == out.TaskType }); i >= 0 &&
				len(tc.tts[i].Patterns) > 0 && !slices.Contains(tc.tts[i].Patterns, out.Pattern) {
				t.Errorf("pattern %q is not one of %v", out.Pattern, tc.tts[i].Patterns)
			}
		})
	}
}

func TestOfflineSynthesize(t *testing.T) {
	cases := []struct {
		name    string
		outputs []llm.StepOutput
		want    []string // lines after the header, in order
	}{
		{
			name: "ranked records ordered by rank",
			outputs: []llm.StepOutput{
				{Step: 1, Value: json.RawMessage(`{"outlet_ids":["out-001","out-002","out-004"]}`)},
				{Step: 2, Value: json.RawMessage(`{"results":[` +
					`{"outlet_id":"out-004","name":"Riverside Walk","score":12.5,"rank":3},` +
					`{"outlet_id":"out-001","name":"Harbour Front","score":88.1,"rank":1},` +
					`{"outlet_id":"out-002","name":"Central Station","score":40,"rank":2}]}`)},
			},
			want: []string{
				"1. Harbour Front (out-001) — score 88.1",
				"2. Central Station (out-002) — score 40",
				"3. Riverside Walk (out-004) — score 12.5",
			},
		},
		{
			name:    "unranked records keep their order",
			outputs: []llm.StepOutput{{Step: 1, Value: json.RawMessage(`{"outlets":[{"outlet_id":"b","name":"B"},{"outlet_id":"a","name":"A"}]}`)}},
			want:    []string{"1. B (b)", "2. A (a)"},
		},
		{
			name:    "scalars",
			outputs: []llm.StepOutput{{Step: 1, Value: json.RawMessage(`{"members":3,"tier":"gold"}`)}},
			want:    []string{"members: 3", "tier: gold"},
		},
		{
			name: "no outputs",
			want: []string{"(no step produced output)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := complete(t, llm.TaskSynthesize, llm.SynthInput{Task: rankTask, Outputs: tc.outputs}, nil)
			lines := strings.Split(strings.TrimRight(msg.Content, "\n"), "\n")
			if lines[0] != `Result for "`+rankTask+`":` {
				t.Errorf("header = %q", lines[0])
			}
			if !slices.Equal(lines[1:], tc.want) {
				t.Errorf("lines = %q, want %q", lines[1:], tc.want)
			}
		})
	}
}

func TestOfflineRejectsUnknownInput(t *testing.T) {
	cases := []struct {
		name  string
		input any
	}{
		{"nil", nil},
		{"string", "route me"},
		{"pointer to input", &llm.RouteInput{Task: "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := offline.New().Complete(testCtx(t), llm.Request{Task: llm.TaskRoute, Input: tc.input})
			if !errors.Is(err, llm.ErrBadInput) {
				t.Fatalf("err = %v, want ErrBadInput", err)
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := offline.New().Complete(ctx, llm.Request{Task: llm.TaskRoute, Input: llm.RouteInput{Task: "x"}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}

// TestOfflineStreamsItsAnswer: with Stream set, the answer arrives in
// several deltas, in order, that add up to the whole answer.
func TestOfflineStreamsItsAnswer(t *testing.T) {
	var deltas []string
	req := llm.NewRequest(llm.TaskSynthesize, llm.SynthInput{Task: rankTask, Outputs: []llm.StepOutput{
		{Step: 1, Value: json.RawMessage(`{"outlets":[{"outlet_id":"b","name":"B"},{"outlet_id":"a","name":"A"}]}`)}}})
	req.Stream = func(d string) { deltas = append(deltas, d) }
	resp, err := offline.New().Complete(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) < 2 || strings.Join(deltas, "") != resp.Message.Content || resp.Provider != "offline" {
		t.Fatalf("deltas %q do not stream answer %q", deltas, resp.Message.Content)
	}
}
