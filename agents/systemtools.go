package agents

import json "github.com/go-json-experiment/json/v1"

// System tool names (seed 002): built in, the same for every tenant.
const (
	ToolSendMessage     = "send_message"
	ToolHandoffToHuman  = "handoff_to_human"
	ToolHandoffToAgent  = "handoff_to_agent"
	ToolEndConversation = "end_conversation"
	ToolTriggerFlow     = "trigger_flow"
	ToolSetContext      = "set_context"
	ToolGetContext      = "get_context"
)

// ContextKeyPattern is the pattern of a set_context / get_context key.
const ContextKeyPattern = `^[a-z0-9][a-z0-9_]{0,63}$`

// MaxContextValueLen bounds a set_context value, encoded, in bytes.
const MaxContextValueLen = 8 << 10

// SystemTools are the system tools, as GET /agent/tools lists them: read
// only, with the JSON Schema of their arguments. An agent's tools may name
// them.
var SystemTools = []Tool{
	systemTool(ToolSendMessage, "Send a message to the user on the conversation's channel, before the final answer.",
		`{"type":"object","properties":{"text":{"type":"string","minLength":1,"maxLength":4000,"description":"the message"}},
		"required":["text"],"additionalProperties":false}`),
	systemTool(ToolHandoffToHuman, "Escalate the conversation to a human operator, with the reason and a summary.",
		`{"type":"object","properties":{"reason":{"type":"string","minLength":1,"maxLength":1000},
		"summary":{"type":"string","maxLength":4000}},"required":["reason"],"additionalProperties":false}`),
	systemTool(ToolHandoffToAgent, "Transfer the conversation to another agent of the tenant.",
		`{"type":"object","properties":{"agent_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,64}$"},
		"reason":{"type":"string","maxLength":1000}},"required":["agent_id"],"additionalProperties":false}`),
	systemTool(ToolEndConversation, "Mark the conversation as resolved: the session is completed.",
		`{"type":"object","properties":{"resolution":{"type":"string","maxLength":1000}},"additionalProperties":false}`),
	systemTool(ToolTriggerFlow, "Start an automation flow of the tenant with an input object.",
		`{"type":"object","properties":{"flow_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,64}$"},
		"input":{"type":"object"}},"required":["flow_id"],"additionalProperties":false}`),
	systemTool(ToolSetContext, "Store a value in the session's memory under a key; later turns of the session read it with get_context.",
		`{"type":"object","properties":{"key":{"type":"string","pattern":"`+ContextKeyPattern+`"},
		"value":{"description":"any JSON value"}},"required":["key","value"],"additionalProperties":false}`),
	systemTool(ToolGetContext, "Read a value stored in the session's memory with set_context.",
		`{"type":"object","properties":{"key":{"type":"string","pattern":"`+ContextKeyPattern+`"}},
		"required":["key"],"additionalProperties":false}`),
}

func systemTool(name, description, params string) Tool {
	var compact json.RawMessage
	if err := json.Unmarshal([]byte(params), &compact); err != nil {
		panic("agents: system tool " + name + ": " + err.Error())
	}
	return Tool{ToolID: "system-" + name, Type: ToolTypeSystem,
		ToolSpec: ToolSpec{Name: name, Description: description, Parameters: compact, Status: StatusActive}}
}
