package executor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
)

// The executor's guards (seed 003): each refuses something in code, writes
// an audit event and, when the step cannot go on, stops it with an
// outcome the decider maps to a terminal code, carrying the evidence.

// Guard defaults.
const (
	// DefaultRepeatCallLimit is how many identical calls (same skill, same
	// arguments) one step may make; the next is blocked.
	DefaultRepeatCallLimit = 3
	// DefaultDeniedLimit is how many calls of skills outside the allowed
	// skills one step may attempt before it stops PERMISSION_DENIED.
	DefaultDeniedLimit = 3
	// DefaultContextTokens is the context budget of a step's turns: past
	// 80 % of it, older turns are compressed further.
	DefaultContextTokens = 32_000
)

// gateStop holds a call at a gate: the step parks until it is approved,
// or, when its server asked the user something (elicit), answered.
type gateStop struct {
	call     orch.PendingCall
	elicit   *orch.Elicitation
	evidence json.RawMessage
}

func (g *gateStop) Error() string {
	if g.elicit != nil {
		return fmt.Sprintf("%s asks the user: %s", g.call.Skill, g.elicit.Message)
	}
	return fmt.Sprintf("%s (%s) awaits an approval", g.call.Skill, g.call.Mode)
}

// stepStop stops the step with a result: a guard refused to go on.
type stepStop struct{ res orch.StepResult }

func (s *stepStop) Error() string { return s.res.Reason }

// stop returns the stepStop of outcome with its reason, a suggestion for
// the planner and the evidence (marshalled into the result).
func stop(outcome, reason, suggestion string, evidence any) error {
	res := orch.StepResult{Outcome: outcome, Reason: reason, Suggestion: suggestion}
	if evidence != nil {
		res.Evidence, _ = json.Marshal(evidence)
	}
	return &stepStop{res: res}
}

// budgetStop is the step's end when the budget refused a draw.
func (t *turn) budgetStop(ex *ledger.Exhausted) *stepStop {
	t.out.Audit("budget.exhausted", t.lineage(), ex)
	outcome := orch.OutcomeBudgetExhausted
	if ex.Dim == orch.DimWallClockS {
		outcome = orch.OutcomeTimedOut
	}
	return &stepStop{res: orch.StepResult{Outcome: outcome, Reason: ex.Error(), Evidence: ex.Evidence()}}
}

// draw takes want from the run's budget, recording it as the step's,
// and writes the hop's unsettled model calls with it (only the dimensions
// want draws from are checked against their limits).
func (t *turn) draw(ctx context.Context, want orch.Vector) error {
	return t.took(want, t.reserve(ctx, want))
}

// reserve is draw's ledger draw alone: it takes want from the run's
// budget and returns the ledger's refusal (*Exhausted) as it is. took
// books its outcome.
func (t *turn) reserve(ctx context.Context, want orch.Vector) error {
	return t.exec.Budgets.Reserve(ctx, t.budget, want)
}

// took books the outcome of reserving want: a refusal is the step's
// budget stop; a draw is the step's.
func (t *turn) took(want orch.Vector, err error) error {
	var ex *ledger.Exhausted
	if errors.As(err, &ex) {
		return t.budgetStop(ex)
	}
	if err != nil {
		return err
	}
	t.drawn = t.drawn.Add(want)
	return nil
}

// giveBack returns want, reserved but not spent (the call it was drawn
// for was not made), to the run's budget.
func (t *turn) giveBack(ctx context.Context, want orch.Vector) {
	_ = t.exec.Budgets.Settle(context.WithoutCancel(ctx), t.budget, want, nil)
}

// spentSoFar is what the step drew besides model usage: its earlier
// turns' and this hop's.
func (t *turn) spentSoFar() orch.Vector {
	if len(t.drawn) == 0 {
		return t.req.Spent
	}
	return t.req.Spent.Add(t.drawn)
}

// ArgsHash identifies a call's arguments whatever their key order or
// spacing: the first 16 hex digits of the SHA-256 of their canonical JSON.
func ArgsHash(args json.RawMessage) string {
	var v any
	canon := args
	if json.Unmarshal(args, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:8])
}

// registryVersion identifies the tools the step could call: their names,
// schemas and annotations, hashed, in the step's order. It is computed
// once a trace event needs it, and is "" before the manifests are loaded.
func (t *turn) registryVersion() string {
	if t.registry != "" || len(t.manifests) == 0 {
		return t.registry
	}
	h := sha256.New()
	for _, name := range t.step.Skills {
		if m, ok := t.manifests[name]; ok {
			b, _ := json.Marshal(m)
			h.Write(b)
		}
	}
	t.registry = hex.EncodeToString(h.Sum(nil))[:12]
	return t.registry
}

// guardCall runs the guards a tool call meets before it may be made: a
// run's secret in its arguments fails closed (UNSAFE_DETECTION), a call
// whose approval mode is gated (a destructive skill always; network and
// delegated unless the tenant's policy or the run's agent relaxes them),
// or a side-effecting call of a step the taint rule holds (taintGates),
// waits at a gate unless the step holds its approval (gateStop), and an
// identical call repeated past the limit is blocked (REPEATED_FAILURE).
func (t *turn) guardCall(ctx context.Context, c llm.ToolCall, hash string) error {
	lin := t.lineage()
	lin.SkillID = c.Name
	if t.leaksSecret(ctx, c.Arguments) {
		ev := map[string]any{"skill_id": c.Name, "args_hash": hash, "guard": "secret_in_arguments"}
		t.out.Audit("guard.unsafe", lin, ev)
		return stop(orch.OutcomeUnsafe, fmt.Sprintf("unsafe: the arguments of a %s call carry a credential of the run", c.Name),
			"", ev)
	}
	mode := t.mode(c.Name)
	gated := t.exec.Modes.Gated(t.req.Run.Request.TenantID, mode) && !t.req.Run.Agent.AutoApproves(mode)
	if tainted := t.taintGates(lin, c, mode, hash); gated || tainted != "" {
		if a := t.approved; t.holdsApproval(c.Name, hash) {
			t.out.Audit("approval.used", lin, map[string]any{"gate_id": a.Gate, "by": a.By, "action": c.Name, "args_hash": hash})
		} else {
			m := t.manifests[c.Name]
			ev := map[string]any{"annotations": m.Annotations, "description": m.Description}
			if tainted != "" {
				ev["tainted_by"] = tainted // the step read an open-world skill's output first
			}
			evidence, _ := json.Marshal(ev)
			t.out.Audit("approval.required", lin, map[string]any{"action": c.Name, "parameters": c.Arguments,
				"args_hash": hash, "risk": mode, "evidence": json.RawMessage(evidence), "step": t.step.Index, "task": t.step.Task})
			return &gateStop{call: orch.PendingCall{ID: c.ID, Skill: c.Name, Arguments: c.Arguments, ArgsHash: hash, Mode: mode},
				evidence: evidence}
		}
	}
	key := c.Name + ":" + hash
	n := t.req.Calls[key] + t.calls[key]
	if limit := t.repeatLimit(); n >= limit {
		ev := map[string]any{"skill_id": c.Name, "args_hash": hash, "count": n + 1, "limit": limit}
		t.out.Audit("guard.repeated_call", lin, ev)
		return stop(orch.OutcomeRepeatedCall, fmt.Sprintf("loop guard: %s was called %d times with the same arguments", c.Name, n+1),
			"the step repeats itself; plan it differently", ev)
	}
	if t.calls == nil {
		t.calls = map[string]int{}
	}
	t.calls[key]++
	return nil
}

// mode is the approval mode of a call of the step's skill name: the
// tenant's override, else the skill's own.
func (t *turn) mode(name string) string {
	return t.exec.Modes.Of(t.req.Run.Request.TenantID, t.manifests[name])
}

// callCounts are the step's identical-call counts after this hop.
func (t *turn) callCounts() map[string]int {
	if len(t.calls) == 0 {
		return t.req.Calls
	}
	out := make(map[string]int, len(t.req.Calls)+len(t.calls))
	for k, v := range t.req.Calls {
		out[k] = v
	}
	for k, v := range t.calls {
		out[k] += v
	}
	return out
}

func (t *turn) repeatLimit() int {
	if t.exec.RepeatCallLimit > 0 {
		return t.exec.RepeatCallLimit
	}
	return DefaultRepeatCallLimit
}

// denied counts a call of a skill outside the step's allowed skills and
// stops the step once the model has tried too often.
func (t *turn) denied(name string) error {
	t.deniedN++
	limit := t.exec.DeniedLimit
	if limit <= 0 {
		limit = DefaultDeniedLimit
	}
	if n := t.req.Denied + t.deniedN; n >= limit {
		ev := map[string]any{"skill_id": name, "attempts": n, "allowed_skills": t.step.Skills}
		return stop(orch.OutcomePermissionDenied,
			fmt.Sprintf("permission denied: %d attempts to call skills outside the step's allowed skills", n), "", ev)
	}
	return nil
}

// leaksSecret reports whether b carries a credential of the run: the
// caller's forwarded API key or one of the executor's configured secrets.
func (t *turn) leaksSecret(ctx context.Context, b []byte) bool {
	return slices.ContainsFunc(t.secrets(ctx), func(s string) bool { return bytes.Contains(b, []byte(s)) })
}

// secrets are the run's credential and the executor's own secrets that
// are long enough to look for.
func (t *turn) secrets(ctx context.Context) []string {
	return slices.DeleteFunc(append([]string{skills.APIKeyOf(ctx)}, t.exec.Secrets...), func(s string) bool { return len(s) < 8 })
}

// withoutSecrets is s with every secret of the run replaced by
// [redacted]: text that leaves the step as an event (a streamed thought
// or observation).
func (t *turn) withoutSecrets(ctx context.Context, s string) string {
	for _, sec := range t.secrets(ctx) {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// grounded reports whether the step may commit an answer: a model-only
// step (or one with no skills) always may; any other needs at least one
// successful tool observation of its own (seed 003: intended, attempted,
// observed, verified, committed; never assumed).
func (t *turn) grounded() bool {
	return !t.mustObserve() || t.req.Observed+t.observed > 0
}

// mustObserve reports whether the step's answer must rest on its own
// observations: it has skills and the planner did not declare it
// model-only.
func (t *turn) mustObserve() bool {
	return !t.step.ModelOnly && len(t.step.Skills) > 0
}

// ungroundedIDs returns the identifiers in data (the string values of
// fields named id or ending in _id or _ids) that appear in none of the
// step's observations nor its inputs: values the model made up rather than
// observed. Once older turns were compressed away the observations are no
// longer all at hand, and nothing is reported.
func (t *turn) ungroundedIDs(data json.RawMessage) []string {
	if !t.mustObserve() {
		return nil // declared to answer without observing
	}
	ids := idValues(data)
	if len(ids) == 0 || slices.ContainsFunc(t.req.Turns, func(tn orch.Turn) bool { return tn.Role == "summary" }) {
		return nil
	}
	seen := map[string]bool{}
	var raw [][]byte
	note := func(b []byte) {
		if !jsonStrings(b, func(s string, _ bool) { seen[s] = true }) {
			raw = append(raw, b) // not JSON: matched as text
		}
	}
	for _, tn := range t.req.Turns {
		if tn.Role == "tool" && !tn.IsError {
			note([]byte(tn.Content))
		}
	}
	for _, in := range t.inputData {
		note(in)
	}
	var missing []string
	for _, id := range ids {
		if !seen[id] && !slices.ContainsFunc(raw, func(b []byte) bool { return bytes.Contains(b, []byte(id)) }) {
			missing = append(missing, id)
		}
	}
	return missing
}

// idValues collects the string values of data's identifier fields, at
// any depth, in the order they appear; nil when data is not JSON.
func idValues(data json.RawMessage) []string {
	var ids []string
	if !jsonStrings(data, func(s string, underID bool) {
		if underID {
			ids = append(ids, s)
		}
	}) {
		return nil
	}
	return ids
}

// isIDName reports whether an object member's name names identifiers.
func isIDName(k string) bool {
	return k == "id" || strings.HasSuffix(k, "_id") || strings.HasSuffix(k, "_ids")
}

// jsonStrings calls f with every string value of the JSON text b, at any
// depth, in order (member names are not values), with whether a member
// on its path is named as identifiers (isIDName). It reports whether b
// is one valid JSON value; f may have been called before a fault is
// found. Like json.Unmarshal, it accepts duplicate names and invalid
// UTF-8 (read as U+FFFD), so an answer cannot slip past the check by
// carrying a malformed byte. A token decoder rather than a decode into
// interfaces: the grounding check runs on every answer, over every
// observation.
func jsonStrings(b []byte, f func(s string, underID bool)) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	// under[i] says whether the container at depth i+1 lies under an
	// identifier member; idName[i] whether its current member is one.
	var under, idName []bool
	for {
		depth := dec.StackDepth()
		kind, n := dec.StackIndex(depth)
		tok, err := dec.ReadToken()
		if err != nil {
			return err == io.EOF && depth == 0
		}
		k := tok.Kind()
		if kind == '{' && n%2 == 0 && k == '"' { // a member's name
			idName[depth-1] = isIDName(tok.String())
			continue
		}
		in := depth > 0 && (under[depth-1] || kind == '{' && idName[depth-1])
		switch k {
		case '"':
			f(tok.String(), in)
		case '{', '[':
			under, idName = append(under, in), append(idName, false)
		case '}', ']':
			under, idName = under[:len(under)-1], idName[:len(idName)-1]
		}
	}
}

// compressTurns keeps the turns within the step's context budget: the
// last KeepTurns, older ones folded into a summary, and fewer while their
// size passes 80 % of ContextTokens (seed 003's context pressure gate).
// The turns this hop added (its calls and their observations) are always
// kept: the next turn must see what it just observed.
func (t *turn) compressTurns(turns []orch.Turn) []orch.Turn {
	keep := t.exec.KeepTurns
	out := compress(turns, keep)
	least := max(len(turns)-len(t.req.Turns), 1)
	limit := t.exec.ContextTokens
	if limit <= 0 {
		limit = DefaultContextTokens
	}
	limit = limit * 8 / 10
	before := turnTokens(out)
	for keep > least && turnTokens(out) > limit {
		keep--
		out = compress(turns, keep)
	}
	if after := turnTokens(out); keep < t.exec.KeepTurns && after < before {
		t.out.Audit("context.compressed", t.lineage(), map[string]any{"tokens_before": before, "tokens_after": after,
			"kept_turns": keep, "context_tokens": limit})
	}
	return out
}

// turnTokens estimates the tokens of turns (four bytes a token).
func turnTokens(turns []orch.Turn) int {
	n := 0
	for _, tn := range turns {
		n += len(tn.Content) + len(tn.ToolArgs) + len(tn.ToolName)
	}
	return n / 4
}
