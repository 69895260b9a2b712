package demo

import (
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentbus/agentbus/skills"
)

// toolHints returns the MCP behaviour hints of every demo tool, skills and
// discovery tools alike: each only reads the fixed catalog, so it is
// read-only, not destructive, idempotent and closed-world. Both tools/list
// (toolAnnotation) and load_skill's manifests derive from it, so the two
// cannot drift.
func toolHints() *skills.Annotations {
	return &skills.Annotations{
		ReadOnlyHint:    mcp.ToBoolPtr(true),
		DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint:  mcp.ToBoolPtr(true),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	}
}

// toolAnnotation is h as the annotations of a tools/list entry.
func toolAnnotation(h *skills.Annotations) mcp.ToolAnnotation {
	if h == nil {
		return mcp.ToolAnnotation{}
	}
	return mcp.ToolAnnotation{
		ReadOnlyHint:    h.ReadOnlyHint,
		DestructiveHint: h.DestructiveHint,
		IdempotentHint:  h.IdempotentHint,
		OpenWorldHint:   h.OpenWorldHint,
	}
}
