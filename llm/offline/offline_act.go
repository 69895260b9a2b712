package offline

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/schema"
)

// act is one executor turn. Before any skill result it calls the first
// allowed skill with arguments taken from the step's inputs and the task;
// after a result it projects the result onto the return_spec.
func act(in llm.ActInput, history []llm.Message) (llm.Message, error) {
	if len(in.Skills) == 0 {
		return jsonMessage(llm.ActOutput{Status: "insufficient", Reason: "the step has no allowed skill",
			Suggestion: "plan this step with a skill"})
	}
	if isLoop(in) {
		return loopAct(in, history)
	}
	skill := in.Skills[0]
	last := lastToolResult(history)
	if last == nil {
		return callSkill(in, skill, len(history))
	}
	if last.IsError {
		return jsonMessage(llm.ActOutput{Status: "failed", Reason: "skill " + skill.Name + " failed: " + last.Content,
			Suggestion: "retry the step"})
	}
	return project(in, skill, []byte(last.Content))
}

func lastToolResult(history []llm.Message) *llm.Message {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == llm.RoleTool {
			return &history[i]
		}
	}
	return nil
}

func callSkill(in llm.ActInput, skill llm.SkillInfo, turn int) (llm.Message, error) {
	input, err := schema.ParseShape(skill.InputSchema)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	inputs := decodeInputs(in.Inputs)
	given := taskArgs(in.Task, input)
	args := map[string]any{}
	for _, field := range sortedNames(input.Properties) {
		if v := fromInputs(inputs, field, input.Properties[field]); v != nil {
			args[field] = v
		} else if v, ok := given[field]; ok {
			args[field] = v
		}
	}
	for _, field := range input.Required {
		if _, ok := args[field]; !ok {
			return jsonMessage(llm.ActOutput{Status: "insufficient",
				Reason:     fmt.Sprintf("skill %s needs %q and the step has no input that provides it", skill.Name, field),
				Suggestion: fmt.Sprintf("add a step before this one that produces %s", field)})
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call-%d", turn+1), Name: skill.Name, Arguments: b}}}, nil
}

func decodeInputs(raw map[string]json.RawMessage) []map[string]any {
	var out []map[string]any
	for _, label := range sortedNames(raw) {
		var m map[string]any
		if json.Unmarshal(raw[label], &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// fromInputs finds field in the outputs of earlier steps, directly or as
// the items of a list of objects (outlet_ids from outlets[].outlet_id).
func fromInputs(inputs []map[string]any, field string, want schema.Shape) any {
	for _, in := range inputs {
		if v, ok := in[field]; ok {
			return v
		}
	}
	if want.Type != "array" {
		return nil
	}
	item := schema.Singular(field)
	for _, in := range inputs {
		for _, k := range sortedNames(in) {
			arr, ok := in[k].([]any)
			if !ok {
				continue
			}
			var vals []any
			for _, el := range arr {
				if obj, ok := el.(map[string]any); ok && obj[item] != nil {
					vals = append(vals, obj[item])
				}
			}
			if len(vals) > 0 {
				return vals
			}
		}
	}
	return nil
}

// project derives the return_spec fields from the skill's output.
func project(in llm.ActInput, skill llm.SkillInfo, result []byte) (llm.Message, error) {
	out, err := schema.ParseShape(skill.OutputSchema)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	shape, err := schema.ParseShape(in.ReturnSpec.Shape)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	valid := schema.Validate(in.ReturnSpec.Shape, result) == nil
	if q := newQuery(in.Task, out); q != nil && isQueryShape(shape) {
		if valid {
			// An extraction script answered it from a large response.
			return jsonMessage(llm.ActOutput{Status: "complete", Label: label(shape), Data: result})
		}
		var decoded map[string]any
		if err := json.Unmarshal(result, &decoded); err != nil {
			return jsonMessage(llm.ActOutput{Status: "failed", Reason: "skill output is not a JSON object", Suggestion: "retry the step"})
		}
		return jsonMessage(llm.ActOutput{Status: "complete", Label: label(shape), Data: mustJSON(q.apply(decoded, 0))})
	}
	ds, err := schema.Derive(out, shape)
	if err != nil {
		return jsonMessage(llm.ActOutput{Status: "insufficient", Reason: err.Error(),
			Suggestion: "choose a skill whose output provides the return_spec"})
	}
	if valid {
		// The result already is the contract's shape: an extraction
		// script produced it from a large response.
		return jsonMessage(llm.ActOutput{Status: "complete", Label: label(shape), Data: result})
	}
	var decoded map[string]any
	if err := json.Unmarshal(result, &decoded); err != nil {
		return jsonMessage(llm.ActOutput{Status: "failed", Reason: "skill output is not a JSON object", Suggestion: "retry the step"})
	}
	data, err := schema.Apply(decoded, ds)
	if err != nil {
		return jsonMessage(llm.ActOutput{Status: "failed", Reason: err.Error(), Suggestion: "retry the step"})
	}
	return jsonMessage(llm.ActOutput{Status: "complete", Label: label(shape), Data: mustJSON(data)})
}

// label names a step output after its fields: outlet_ids, results.
func label(shape schema.Shape) string {
	names := sortedNames(shape.Properties)
	if isQueryShape(shape) && len(names) > 1 {
		// A query's records name it; its summary goes with them.
		names = slices.DeleteFunc(names, func(n string) bool { return n == summaryField })
	}
	sort.Strings(names)
	l := strings.Join(names, "_")
	if len(l) > 64 {
		l = l[:64]
	}
	if l == "" {
		l = "output"
	}
	return strings.ToLower(l)
}
