package llm

import json "github.com/go-json-experiment/json/v1"

// Output schemas of the structured model tasks.
var (
	// ClassifySchema constrains a router agent's choice of a sub-agent.
	ClassifySchema = json.RawMessage(`{"type":"object","required":["agent_id"],"properties":{
		"agent_id":{"type":"string","minLength":1},"reason":{"type":"string"}}}`)
	// RouteSchema constrains a routing decision.
	RouteSchema = json.RawMessage(`{"type":"object","required":["task_type","pattern"],"properties":{
		"task_type":{"type":"string","minLength":1},"pattern":{"type":"string","minLength":1},"reason":{"type":"string"},
		"clarify":{"type":"string"}}}`)
	// PlanSchema constrains a plan: at most 10 steps, each with a return_spec.
	PlanSchema = json.RawMessage(`{"type":"object","properties":{
		"infeasible":{"type":"string"},
		"steps":{"type":"array","maxItems":10,"items":{"type":"object","required":["step","task","skills","return_spec"],"properties":{
			"step":{"type":"integer","minimum":1},"task":{"type":"string","minLength":1},
			"skills":{"type":"array","minItems":1,"items":{"type":"string"}},
			"return_spec":{"type":"object","required":["shape"],"properties":{"shape":{"type":"object"},"reason":{"type":"string"}}},
			"depends_on":{"type":"array","items":{"type":"integer"}},"model_only":{"type":"boolean"}}}}}}`)
	// SuperviseSchema constrains a supervisor's decomposition.
	SuperviseSchema = json.RawMessage(`{"type":"object","properties":{
		"infeasible":{"type":"string"},
		"lanes":{"type":"array","maxItems":10,"items":{"type":"object","required":["goal","skills"],"properties":{
			"goal":{"type":"string","minLength":1},"skills":{"type":"array","minItems":1,"items":{"type":"string"}},
			"agent_id":{"type":"string"}}}}}}`)
	// ReviewSchema constrains a supervisor's review of its lanes.
	ReviewSchema = json.RawMessage(`{"type":"object","required":["sufficient"],"properties":{
		"sufficient":{"type":"boolean"},"gaps":{"type":"string","maxLength":2000}},
		"if":{"properties":{"sufficient":{"const":false}}},"then":{"required":["gaps"],"properties":{"gaps":{"minLength":1}}}}`)
	// LoopAnswerShape is the return_spec of a loop step (the ReACT loop,
	// a supervisor lane): a free-text answer.
	LoopAnswerShape = json.RawMessage(`{"type":"object","required":["answer"],"properties":{"answer":{"type":"string"}}}`)
	// ExtractSchema constrains an extraction script.
	ExtractSchema = json.RawMessage(`{"type":"object","required":["language","script"],"properties":{
		"language":{"enum":["python","jq"]},"script":{"type":"string","minLength":1,"maxLength":20000}}}`)
	// ActSchema constrains an executor's final answer.
	ActSchema = json.RawMessage(`{"type":"object","required":["status"],"properties":{
		"status":{"enum":["complete","insufficient","failed","conflict"]},"label":{"type":"string","pattern":"^[a-z0-9_]{1,64}$"},
		"data":{},"reason":{"type":"string"},"suggestion":{"type":"string"},
		"confidence":{"type":"number","minimum":0,"maximum":1},
		"conflicts":{"type":"array","minItems":2,"maxItems":10,"items":{"type":"object","required":["source","claim"],
			"properties":{"source":{"type":"string","minLength":1,"maxLength":500},"claim":{"type":"string","minLength":1,"maxLength":2000}}}}},
		"if":{"properties":{"status":{"const":"conflict"}}},"then":{"required":["reason","conflicts"]}}`)
)
