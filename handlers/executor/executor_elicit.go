package executor

import (
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
)

// Elicitation (seed 004, MCP): a skill's server that asks the user
// something during a call parks the step at an elicitation gate. The call
// was made and its question cancelled; once the gate is approved with an
// answer, the step makes the call again, and the call's Elicitor gives
// the server the answers, in order (a server that asks again parks the
// step again). Each set of answers is a call of its own idempotency key.

// answers are the recorded answers the call c (of argument hash hash and
// index n) is made with: those of the approval the step resumed with,
// when it is this call's.
func (t *turn) answers(c llm.ToolCall, hash string, n int) []skills.Answer {
	a := t.approved
	if a == nil || a.Call.Skill != c.Name || a.Call.ArgsHash != hash || a.Call.N != n {
		return nil
	}
	out := make([]skills.Answer, len(a.Call.Answers))
	for i, ans := range a.Call.Answers {
		out[i] = skills.Answer{Question: ans.Question, Content: ans.Content}
	}
	return out
}

// elicited parks the step at an elicitation gate: the call's server asked
// q, which none of answers answers. The call will be made again, so it
// does not count toward the loop guard's identical calls.
func (t *turn) elicited(c llm.ToolCall, hash, mode string, answers []skills.Answer, q skills.Elicitation) error {
	lin := t.lineage()
	lin.SkillID = c.Name
	t.out.Audit("skill.elicitation", lin, map[string]any{"skill_id": c.Name, "args_hash": hash, "question": q.Question,
		"message": q.Message, "requested_schema": q.Schema, "answers": len(answers)})
	if k := c.Name + ":" + hash; t.calls[k] > 0 {
		t.calls[k]--
	}
	call := orch.PendingCall{ID: c.ID, Skill: c.Name, Arguments: c.Arguments, ArgsHash: hash, Mode: mode}
	for _, a := range answers {
		call.Answers = append(call.Answers, orch.ElicitAnswer{Question: a.Question, Content: a.Content})
	}
	m := t.manifests[c.Name]
	evidence, _ := json.Marshal(map[string]any{"annotations": m.Annotations, "description": m.Description})
	return &gateStop{call: call, evidence: evidence,
		elicit: &orch.Elicitation{Message: q.Message, Schema: q.Schema, Question: q.Question}}
}
