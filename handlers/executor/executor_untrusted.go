package executor

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
)

// Untrusted content in a step (seed 003's injection and exfiltration
// triggers). The model sees tool results as delimited data (llm.Delimit);
// in code, two rules hold whatever the model does with them:
//   - the taint rule: once a step has observed the output of an open-world
//     skill, its side-effecting calls go through an approval gate unless
//     the tenant's taint policy is relaxed (guard.taint);
//   - injection detection: instruction-like content in a tool result is
//     traced (injection.suspected) and, under the tenant's "stop" policy,
//     ends the run UNSAFE_DETECTION before the model reads it.

// taintedBy is the open-world skill whose output tainted the step (in an
// earlier turn or this hop), or "".
func (t *turn) taintedBy() string { return cmp.Or(t.req.Tainted, t.tainted) }

// inspect reads the result of call c before the model does: the result
// of an open-world skill taints the step, and instruction-like content is
// traced, or stops the step UNSAFE_DETECTION when the tenant's injection
// policy says so.
func (t *turn) inspect(c llm.ToolCall, result []byte) error {
	m, called := t.manifests[c.Name]
	if !called {
		return nil // refused before any skill ran: the result is agentbus's
	}
	if m.OpenWorld() && !m.Internal && t.taintedBy() == "" {
		t.tainted = c.Name
	}
	hits := llm.SuspectInjection(string(result))
	if len(hits) == 0 {
		return nil
	}
	tenant := t.req.Run.Request.TenantID
	policy := runctl.InjectionRecord
	if t.exec.Untrusted.InjectionStops(tenant) {
		policy = runctl.InjectionStop
	}
	lin := t.lineage()
	lin.SkillID = c.Name
	ev := map[string]any{"skill_id": c.Name, "call_id": c.ID, "patterns": hits, "response_size_bytes": len(result),
		"open_world": m.OpenWorld() && !m.Internal, "policy": policy, "step": t.step.Index}
	t.out.Audit("injection.suspected", lin, ev)
	if policy != runctl.InjectionStop {
		return nil
	}
	return stop(orch.OutcomeUnsafe, fmt.Sprintf("unsafe: the result of a %s call holds instruction-like content (%s)",
		c.Name, strings.Join(hits, ", ")), "", ev)
}

// taintGates applies the taint rule to call c in mode: it returns the
// skill that tainted the step when the call must go through a gate for
// it, else "". The rule's firing is traced (guard.taint: the tainting
// skill, the call, and whether the tenant's policy gated or relaxed it),
// except for the call a resumed step holds the approval of.
func (t *turn) taintGates(lin events.Audit, c llm.ToolCall, mode, hash string) string {
	by := t.taintedBy()
	if by == "" || mode == skills.ModeReadOnly {
		return ""
	}
	policy := runctl.TaintGate
	if t.exec.Untrusted.TaintRelaxed(t.req.Run.Request.TenantID) {
		policy = runctl.TaintRelaxed
	}
	if !t.holdsApproval(c.Name, hash) {
		t.out.Audit("guard.taint", lin, map[string]any{"tainted_by": by, "skill_id": c.Name, "approval_mode": mode,
			"args_hash": hash, "policy": policy, "step": t.step.Index})
	}
	if policy == runctl.TaintRelaxed {
		return ""
	}
	return by
}

// holdsApproval reports whether the step resumed with the approval of a
// call of skill with arguments hash.
func (t *turn) holdsApproval(skill, hash string) bool {
	a := t.approved
	return a != nil && a.Call.Skill == skill && a.Call.ArgsHash == hash
}
