package llm

import (
	"fmt"
	"slices"

	"github.com/agentbus/agentbus/skills"
)

// extract writes the extraction script for a large response: the
// projection of the skill's output onto the return_spec. It writes Python,
// as the blueprint's large-response path does, and jq when the sandbox
// offers no Python.
func extract(in ExtractInput) (Message, error) {
	out, err := skills.ParseSchema(in.Skill.OutputSchema)
	if err != nil {
		return Message{}, fmt.Errorf("llm: offline: %w", err)
	}
	shape, err := skills.ParseSchema(in.ReturnSpec.Shape)
	if err != nil {
		return Message{}, fmt.Errorf("llm: offline: %w", err)
	}
	ds, err := skills.Derive(out, shape)
	if err != nil {
		return Message{}, fmt.Errorf("llm: offline: cannot extract the return_spec: %w", err)
	}
	if slices.Contains(in.Languages, "python") || len(in.Languages) == 0 {
		return jsonMessage(ExtractOutput{Language: "python", Script: skills.Python(ds)})
	}
	return jsonMessage(ExtractOutput{Language: "jq", Script: skills.JQ(ds)})
}
