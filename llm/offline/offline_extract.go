package offline

import (
	"fmt"
	"slices"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/schema"
)

// extract writes the extraction script for a large response: the
// projection of the skill's output onto the return_spec. It writes Python,
// as the blueprint's large-response path does, and jq when the sandbox
// offers no Python.
func extract(in llm.ExtractInput) (llm.Message, error) {
	out, err := schema.ParseShape(in.Skill.OutputSchema)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	shape, err := schema.ParseShape(in.ReturnSpec.Shape)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: %w", err)
	}
	ds, err := schema.Derive(out, shape)
	if err != nil {
		return llm.Message{}, fmt.Errorf("offline: cannot extract the return_spec: %w", err)
	}
	if slices.Contains(in.Languages, "python") || len(in.Languages) == 0 {
		return jsonMessage(llm.ExtractOutput{Language: "python", Script: schema.Python(ds)})
	}
	return jsonMessage(llm.ExtractOutput{Language: "jq", Script: schema.JQ(ds)})
}
