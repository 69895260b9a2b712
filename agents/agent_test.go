package agents

import (
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

func validAgent() AgentSpec {
	s := AgentSpec{Name: "Support", SystemPrompt: "Help the customer.", Tools: []string{"lookup_invoice", "process_refund"}}
	s.Normalize()
	return s
}

func ptr[T any](v T) *T { return &v }

func TestAgentDefaults(t *testing.T) {
	var s AgentSpec
	s.Normalize()
	if s.Type != TypeStandard || s.Model != DefaultModel || s.MaxTurns != DefaultMaxTurns || s.HandoffBehavior != HandoffEscalate ||
		s.Status != StatusActive || s.Tools == nil || s.SubAgents == nil || s.Skills == nil {
		t.Fatalf("defaults %+v", s)
	}
	if err := validAgent().Validate(""); err != nil {
		t.Fatalf("valid agent: %v", err)
	}
}

// Every validation rule answers its own code and names the field.
func TestAgentValidation(t *testing.T) {
	long := strings.Repeat("x", MaxPromptLen+1)
	steps := func() []Step {
		return []Step{
			{StepID: "triage", Name: "Triage", SystemPrompt: "Greet.", Tools: []string{"lookup_invoice"}, IsInitial: true},
			{StepID: "billing", Name: "Billing", SystemPrompt: "Bill.", TransitionTools: []string{"transition_to_triage", "escalate_to_human"}, IsFinal: true},
		}
	}
	cases := []struct {
		name, code, field string
		edit              func(*AgentSpec)
	}{
		{"no name", CodeNameRequired, "name", func(s *AgentSpec) { s.Name = "  " }},
		{"long name", CodeFieldTooLong, "name", func(s *AgentSpec) { s.Name = long }},
		{"long description", CodeFieldTooLong, "description", func(s *AgentSpec) { s.Description = long }},
		{"bad type", CodeInvalidType, "type", func(s *AgentSpec) { s.Type = "swarm" }},
		{"no prompt", CodeSystemPromptRequired, "system_prompt", func(s *AgentSpec) { s.SystemPrompt = "" }},
		{"long prompt", CodeFieldTooLong, "system_prompt", func(s *AgentSpec) { s.SystemPrompt = long }},
		{"invalid UTF-8 prompt", CodeFieldTooLong, "system_prompt", func(s *AgentSpec) { s.SystemPrompt = "\xff" }},
		{"bad model", CodeInvalidModel, "model", func(s *AgentSpec) { s.Model = "claude 3" }},
		{"temperature", CodeInvalidModelConfig, "model_config.temperature", func(s *AgentSpec) { s.ModelConfig.Temperature = ptr(1.5) }},
		{"negative max tokens", CodeInvalidModelConfig, "model_config.max_tokens", func(s *AgentSpec) { s.ModelConfig.MaxTokens = -1 }},
		{"top_p 0", CodeInvalidModelConfig, "model_config.top_p", func(s *AgentSpec) { s.ModelConfig.TopP = ptr(0.0) }},
		{"five stops", CodeInvalidModelConfig, "model_config.stop_sequences", func(s *AgentSpec) {
			s.ModelConfig.StopSequences = []string{"a", "b", "c", "d", "e"}
		}},
		{"empty stop", CodeInvalidModelConfig, "model_config.stop_sequences[0]", func(s *AgentSpec) { s.ModelConfig.StopSequences = []string{""} }},
		{"bad tool", CodeInvalidTool, "tools[1]", func(s *AgentSpec) { s.Tools[1] = "rm -rf" }},
		{"repeated tool", CodeInvalidTool, "tools[1]", func(s *AgentSpec) { s.Tools[1] = s.Tools[0] }},
		{"bad sub-agent", CodeInvalidSubAgent, "sub_agents[0]", func(s *AgentSpec) {
			s.Type, s.SubAgents = TypeSupervisor, []string{"a/b"}
		}},
		{"own sub-agent", CodeInvalidSubAgent, "sub_agents", func(s *AgentSpec) { s.Type, s.SubAgents = TypeRouter, []string{"self"} }},
		{"supervisor without sub-agents", CodeSubAgentsRequired, "sub_agents", func(s *AgentSpec) { s.Type = TypeSupervisor }},
		{"router without sub-agents", CodeSubAgentsRequired, "sub_agents", func(s *AgentSpec) { s.Type = TypeRouter }},
		{"standard with steps and sub-agents", CodeSubAgentsNotAllowed, "sub_agents", func(s *AgentSpec) {
			s.SubAgents, s.Steps = []string{"other"}, steps()
		}},
		{"bad skill", CodeInvalidSkill, "skills[0]", func(s *AgentSpec) { s.Skills = []string{"sql expert"} }},
		{"steps on a router", CodeInvalidSteps, "steps", func(s *AgentSpec) {
			s.Type, s.SubAgents, s.Steps = TypeRouter, []string{"other"}, steps()
		}},
		{"repeated step id", CodeInvalidSteps, "steps[1].step_id", func(s *AgentSpec) { s.Steps = steps(); s.Steps[1].StepID = "triage" }},
		{"step without name", CodeInvalidSteps, "steps[0].name", func(s *AgentSpec) { s.Steps = steps(); s.Steps[0].Name = "" }},
		{"step without prompt", CodeInvalidSteps, "steps[1].system_prompt", func(s *AgentSpec) { s.Steps = steps(); s.Steps[1].SystemPrompt = "" }},
		{"step tool not the agent's", CodeInvalidSteps, "steps[0].tools[0]", func(s *AgentSpec) {
			s.Steps = steps()
			s.Steps[0].Tools = []string{"run_diagnostics"}
		}},
		{"bad transition tool", CodeInvalidSteps, "steps[1].transition_tools[0]", func(s *AgentSpec) {
			s.Steps = steps()
			s.Steps[1].TransitionTools = []string{"go to"}
		}},
		{"transition to no step", CodeInvalidSteps, "steps[1].transition_tools[0]", func(s *AgentSpec) {
			s.Steps = steps()
			s.Steps[1].TransitionTools = []string{"transition_to_refund"}
		}},
		{"transition not a stage tool", CodeInvalidSteps, "steps[1].transition_tools[0]", func(s *AgentSpec) {
			s.Steps = steps()
			s.Steps[1].TransitionTools = []string{"resolve_issue"}
		}},
		{"two initial steps", CodeInvalidSteps, "steps", func(s *AgentSpec) { s.Steps = steps(); s.Steps[1].IsInitial = true }},
		{"no final step", CodeInvalidSteps, "steps", func(s *AgentSpec) { s.Steps = steps(); s.Steps[1].IsFinal = false }},
		{"negative max turns", CodeInvalidMaxTurns, "max_turns", func(s *AgentSpec) { s.MaxTurns = -1 }},
		{"too many turns", CodeInvalidMaxTurns, "max_turns", func(s *AgentSpec) { s.MaxTurns = MaxMaxTurns + 1 }},
		{"bad handoff", CodeInvalidHandoffBehavior, "handoff_behavior", func(s *AgentSpec) { s.HandoffBehavior = "transfer" }},
		{"unknown limit", CodeInvalidLimits, "limits", func(s *AgentSpec) { s.Limits = orch.Vector{"parsecs": 1} }},
		{"negative limit", CodeInvalidLimits, "limits", func(s *AgentSpec) { s.Limits = orch.Vector{orch.DimInputTokens: -1} }},
		{"destructive auto-approved", CodeInvalidAutoApprove, "auto_approve", func(s *AgentSpec) { s.AutoApprove = []string{"network", "destructive"} }},
		{"unknown auto-approved mode", CodeInvalidAutoApprove, "auto_approve", func(s *AgentSpec) { s.AutoApprove = []string{"everything"} }},
		{"one-message window", CodeInvalidHistoryWindow, "history_window.max_messages", func(s *AgentSpec) {
			s.HistoryWindow = &orch.HistoryWindow{MaxMessages: 1}
		}},
		{"tiny token window", CodeInvalidHistoryWindow, "history_window.max_tokens", func(s *AgentSpec) {
			s.HistoryWindow = &orch.HistoryWindow{MaxTokens: 50}
		}},
		{"negative summarize_after", CodeInvalidHistoryWindow, "history_window.summarize_after", func(s *AgentSpec) {
			s.HistoryWindow = &orch.HistoryWindow{SummarizeAfter: -1}
		}},
		{"bad status", CodeInvalidStatus, "status", func(s *AgentSpec) { s.Status = "archived" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validAgent()
			c.edit(&s)
			err := s.Validate("self")
			if err == nil || err.Code != c.code || err.Field != c.field {
				t.Fatalf("got %+v, want code %s on %s", err, c.code, c.field)
			}
		})
	}
	ok := validAgent()
	ok.Steps = steps()
	ok.ModelConfig = ModelConfig{Temperature: ptr(0.0), MaxTokens: 1024, TopP: ptr(1.0), StopSequences: []string{"END"}}
	ok.Limits = orch.Vector{orch.DimInputTokens: 8000, orch.DimOutputTokens: 2000}
	if err := ok.Validate("self"); err != nil {
		t.Fatalf("agent with steps, settings and limits: %v", err)
	}
	// A standard agent without steps may name the agents it hands off to.
	handsOff := validAgent()
	handsOff.SubAgents = []string{"agent-billing"}
	if err := handsOff.Validate("self"); err != nil {
		t.Fatalf("standard agent with handoff targets: %v", err)
	}
}

// Handoff targets must exist; chains may not loop or pass level 3.
func TestCheckSubAgents(t *testing.T) {
	tenant := map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil, "d": nil, "top": {"new"}}
	spec := func(subs ...string) *AgentSpec { return &AgentSpec{Type: TypeSupervisor, SubAgents: subs} }
	cases := []struct {
		name, self string
		spec       *AgentSpec
		code       string
	}{
		{"leaf targets", "new", spec("c", "d"), ""},
		{"three levels", "new", spec("a"), CodeHandoffTooDeep}, // new → a → b → c under top: 4 levels from top
		{"three levels, no parent", "solo", spec("a"), ""},     // solo → a → b → c
		{"unknown", "new", spec("d", "ghost"), CodeUnknownAgent},
		{"loop", "c", spec("a"), CodeHandoffTooDeep}, // c → a → b → c
		{"four levels", "solo", spec("top"), ""},     // solo → top → new (new has no edges yet)
	}
	for _, c := range cases {
		err := CheckSubAgents(c.self, c.spec, tenant)
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.code != "" && (err == nil || err.Code != c.code):
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	if err := CheckSubAgents("x", spec("d", "ghost"), tenant); err == nil || err.Field != "sub_agents[1]" {
		t.Fatalf("unknown sub-agent field: %+v", err)
	}
}

// An agent round-trips through its stored definition, and a run records
// its instructions, settings, tools, limits and auto-approved modes.
func TestAgentDefinitionRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	a := Agent{AgentID: "agent-1", TenantID: "acme", AgentSpec: validAgent(), Version: 2, CreatedAt: at, UpdatedAt: at.Add(time.Minute)}
	a.ModelConfig.Temperature = ptr(0.2)
	a.Limits = orch.Vector{orch.DimOutputTokens: 2000}
	a.AutoApprove = []string{"network"}
	d, err := a.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != store.KindAgent || d.ID != "agent-1" || d.Name != "Support" || d.Status != StatusActive || d.Version != 2 {
		t.Fatalf("definition envelope %+v", d)
	}
	if err := store.Validate(store.IndexDefinitions, d); err != nil {
		t.Fatalf("definition does not validate: %v", err)
	}
	back, err := AgentOf(d)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(back)
	w, _ := json.Marshal(a)
	if string(g) != string(w) {
		t.Fatalf("round trip:\n got %s\nwant %s", g, w)
	}
	if _, err := TriggerOf(d); err == nil {
		t.Fatal("an agent's definition read as a trigger")
	}
	run := a.RunDef()
	if run.ID != "agent-1" || run.Version != 2 || run.Instructions != "Help the customer." || run.MaxTurns != DefaultMaxTurns ||
		*run.ModelSettings.Temperature != 0.2 || run.Limits[orch.DimOutputTokens] != 2000 || !run.AllowsSkill("process_refund") ||
		run.AllowsSkill("delete_account") || !run.AutoApproves("network") || run.AutoApproves("delegated") || run.AutoApproves("destructive") {
		t.Fatalf("run definition %+v", run)
	}
}
