package executor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tracing"
)

// Executor is SubAgent-B: each message is one model turn of one step. It
// may call only the step's allowed skills, cannot spawn subagents, checks
// its output against the return_spec and writes it through write_memory.
type Executor struct {
	Model     llm.Model
	Skills    SkillCaller
	Memory    memory.MemoryStore
	Writer    *memory.MemoryWriter
	ToolCalls jetstream.KeyValue // idempotency records; nil disables reuse
	Log       zerolog.Logger
	Now       func() time.Time
	// MaxTurns bounds the model turns of one step; default 6.
	MaxTurns int
	// KeepTurns is how many recent turns a step message carries; older
	// ones are folded into one summary turn. Default 8.
	KeepTurns int
	// LargeResponse is the content-length gate in bytes; default 50 KB.
	LargeResponse int
	// Credentials forwards the caller's API key to the Skill Service; nil
	// uses the worker's configured key only.
	Credentials *runctl.Credentials
	// Sandbox extracts from responses at or above LargeResponse; nil
	// reports them to the model as errors.
	Sandbox Sandbox
	// SkillTimeout bounds one skill call (default DefaultSkillTimeout): a
	// call that takes longer fails the step, and the run replans.
	SkillTimeout time.Duration
	// Cancels are the cancelled runs: a turn of one finishes its step
	// cancelled instead of running, and a turn in flight (its model or
	// skill call) is stopped when its run is cancelled. Nil cancels none.
	Cancels *runctl.Cancels
	// Budgets is the budget ledger each model call, skill call and memory
	// write of a step draws from before it is made; nil draws nothing.
	Budgets *ledger.Budgets
	// Breakers are the per-skill circuit breakers; nil opens none.
	Breakers *ledger.Breakers
	// RepeatCallLimit bounds identical calls per step (default
	// DefaultRepeatCallLimit); DeniedLimit bounds attempts at skills
	// outside the allowed ones (default DefaultDeniedLimit).
	RepeatCallLimit, DeniedLimit int
	// ContextTokens is the context budget of a step's turns (default
	// DefaultContextTokens).
	ContextTokens int
	// Modes are the tenants' approval-mode overrides; nil uses each
	// skill's own mode.
	Modes *runctl.ApprovalModes
	// Secrets are credentials no tool argument or step output may carry
	// (the configured Skill Service key, for one); the caller's forwarded
	// key is always one.
	Secrets []string
	// Gates are the approval records: a resumed step makes its held call
	// only if its gate's record approves it. Nil approves nothing.
	Gates *runctl.Gates
	// Replies streams a skill's progress reports to a run that streams
	// (tool_progress chunks); nil asks for none.
	Replies *handlers.Replies
	// Records are the tenants' payload record choices: a tenant that
	// keeps them has its model calls' requests and answers and its tool
	// results traced; nil keeps none.
	Records *runctl.RecordPolicy
	// Untrusted are the tenants' taint and injection policies; nil keeps
	// the defaults (a tainted step's side effects are gated, a suspected
	// injection is recorded).
	Untrusted *runctl.UntrustedPolicy
}

// NewExecutor returns an executor.
func NewExecutor(model llm.Model, sk SkillCaller, mem memory.MemoryStore, locks, toolcalls jetstream.KeyValue, log zerolog.Logger) *Executor {
	return &Executor{
		Model: model, Skills: sk, Memory: mem, ToolCalls: toolcalls, Log: log, Now: time.Now,
		Writer:   &memory.MemoryWriter{Store: mem, Locks: locks},
		MaxTurns: 6, KeepTurns: 8, LargeResponse: 50 << 10,
	}
}

// ErrSpawnDenied is what an executor's attempt to start a subagent gets.
var ErrSpawnDenied = errors.New("handlers: executors cannot spawn subagents; return insufficient instead")

// spawnTools are tool names that would start another agent.
var spawnTools = []string{"spawn_subagent", "create_subagent", "delegate", "run_agent"}

// Routes are the events the executor consumes: a step's first turn and
// each next one.
func (x *Executor) Routes() []events.Route {
	return []events.Route{
		events.On(events.TypeStepRequested, x.stepTurn),
		events.On(events.TypeStepIterated, x.stepTurn),
	}
}

// Handle is the executor's events.Handler.
func (x *Executor) Handle(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return events.Dispatch(handlers.RoleExecutor, x.Routes()...)(ctx, ev)
}

func (x *Executor) stepTurn(ctx context.Context, ev event.Event, req orch.StepRequest) ([]event.Event, error) {
	step := req.Run.Plan.Live(req.Step)
	if step == nil {
		return nil, events.Permanent(fmt.Errorf("handlers: step %d is not in plan %s", req.Step, req.Run.Plan.PlanID))
	}
	t := turn{exec: x, in: ev, req: req, step: *step, out: handlers.Outbox{In: ev}, rec: llm.Record(x.Model).KeepPayloads(x.Records.Keeps(req.Run.Request.TenantID)), budget: ledger.StepBudget(req)}
	if err := t.asLane(); err != nil {
		return nil, err
	}
	t.model = handlers.AgentModel(x.Budgets.ReportingModel(t.rec, t.budget, func(d orch.Vector) { t.drawn = t.drawn.Add(d) }), cmp.Or(t.lane, req.Run.Agent))
	tenant, runID := req.Run.Request.TenantID, req.Run.Request.RunID
	ctx, release := x.Cancels.Watch(ctx, tenant, runID)
	defer release()
	if errors.Is(context.Cause(ctx), runctl.ErrRunCancelled) {
		return t.cancelled()
	}
	// The step's inputs are read while the caller's key is read and the
	// step's skills are loaded (a manifest not cached is a round trip to
	// the Skill Service): the reads are done before the turn's context
	// ends.
	t.inputs = t.readInputs(ctx)
	defer func() { _, _ = t.inputs() }()
	ctx, err := x.Credentials.Context(ctx, req.Run.Request)
	if err == nil {
		err = t.run(ctx)
	}
	if err != nil {
		if errors.Is(context.Cause(ctx), runctl.ErrRunCancelled) {
			return t.cancelled() // stopped in flight
		}
		var st *stepStop
		var ex *ledger.Exhausted
		switch {
		case errors.As(err, &st):
			t.resumeAfterBudget(&st.res, nil, 0)
		case errors.As(err, &ex):
			st = t.budgetStop(ex)
			t.resumeAfterBudget(&st.res, nil, 0)
		default:
			res, ok := handlers.StepFailure(err)
			if !ok {
				return nil, err // transient: the turn is delivered again
			}
			st = &stepStop{res: res}
		}
		if err := t.finish(st.res); err != nil {
			return nil, err
		}
	}
	return t.out.Result()
}

// turn is the work of one executor message.
type turn struct {
	exec      *Executor
	in        event.Event
	req       orch.StepRequest
	step      orch.Step
	out       handlers.Outbox
	skills    map[string]llm.SkillInfo   // the step's allowed skills, by name
	manifests map[string]skills.Manifest // their manifests (annotations)
	registry  string                     // the version of the step's tool registry, once computed
	rec       *llm.Recorder              // the hop's model calls
	model     llm.Model                  // rec, drawing from the run's budget
	drawn     orch.Vector                // what this hop drew besides model usage
	observed  int                        // this hop's successful tool observations
	calls     map[string]int             // this hop's calls by skill and argument hash
	deniedN   int                        // this hop's calls outside the allowed skills
	budget    ledger.RunBudget           // the run's ledger as this hop draws from it
	inputData map[string]json.RawMessage // the outputs of the steps this one depends on
	approved  *orch.Approved             // the approval of the call a resumed step holds, once checked
	steered   int                        // the run's steering messages the step has seen, with this hop's
	tools     orch.ToolUses              // this hop's tool calls by tool name
	tainted   string                     // the open-world skill whose output tainted the step in this hop
	lane      *orch.AgentDef             // the sub-agent a supervisor agent's lane runs as (executor_lane.go)

	// inputs awaits the reads of the outputs of the steps this one
	// depends on (readInputs).
	inputs func() (map[string]json.RawMessage, error)
}

// steers are the run's steering messages (POST /agent/runs/{id}/steer)
// as user messages after the turns: every model turn of the run's steps
// sees them all. Those new to the step are traced (steer.applied).
func (t *turn) steers() []llm.Message {
	run := t.req.Run.Request
	list := t.exec.Cancels.Steers(run.TenantID, run.RunID)
	t.steered = max(t.req.Steered, len(list))
	var msgs []llm.Message
	for i, st := range list {
		if i >= t.req.Steered {
			t.out.Audit("steer.applied", t.lineage(), map[string]any{"steer_id": st.ID, "by": st.By, "step": t.step.Index,
				"message_bytes": len(st.Message)})
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "The user adds, while the run is going: " + st.Message})
	}
	return msgs
}

// spent emits the hop's model.called events and returns the step's usage
// so far: the earlier turns' and this hop's. Call it once, with the
// hop's one orchestration output.
func (t *turn) spent() llm.Usage {
	return t.req.Usage.Add(t.out.ModelCalls(t.lineage(), t.rec))
}

func (t *turn) lineage() events.Audit {
	return events.Audit{PlanID: t.req.Run.Plan.PlanID, TaskID: t.step.TaskID, UserID: t.req.Run.Request.UserID}
}

func (t *turn) run(ctx context.Context) error {
	if maxTurns := t.maxTurns(); t.req.Iteration >= maxTurns {
		return t.finish(orch.StepResult{Outcome: orch.OutcomeFailed,
			Reason: fmt.Sprintf("step used its %d turns without an answer", maxTurns), Suggestion: "split the step"})
	}
	tenant := t.req.Run.Request.TenantID
	var infos []llm.SkillInfo
	var tools []llm.Tool
	t.skills, t.manifests = map[string]llm.SkillInfo{}, map[string]skills.Manifest{}
	for _, name := range t.step.Skills {
		m, err := t.exec.Skills.Load(ctx, tenant, name)
		if errors.Is(err, skills.ErrSkillNotFound) {
			return t.skillUnavailable(name, err)
		}
		if err != nil {
			return fmt.Errorf("handlers: load_skill %s: %w", name, err)
		}
		info := llm.SkillInfo{Name: m.Name, Description: m.Description, InputSchema: m.InputSchema, OutputSchema: m.OutputSchema}
		infos = append(infos, info)
		t.skills[m.Name], t.manifests[m.Name] = info, m
		tools = append(tools, llm.Tool{Name: m.Name, Description: m.Description, Parameters: m.InputSchema})
	}
	tools = append(tools, t.handoffTools()...)
	inputs, err := t.inputs()
	if err != nil {
		return err
	}
	t.inputData = inputs
	if a := t.req.Approved; a != nil {
		return t.resume(ctx, *a)
	}
	in := llm.ActInput{Task: t.step.Task, Framing: t.req.Run.Framing, Skills: infos, Inputs: inputs,
		ReturnSpec: llm.ReturnSpec{Shape: t.step.ReturnSpec.Shape, Reason: t.step.ReturnSpec.Reason},
		Memories:   t.req.Run.Context.Memories}
	req := llm.NewRequest(llm.TaskAct, in)
	req.Tools, req.Schema = tools, llm.ActSchema
	req.Messages = append(append(append(t.handoffNote(), t.clarifications()...), toMessages(t.req.Turns)...), t.steers()...)
	req.Repair = t.req.Repairs > 0 // a turn after a rejected one draws on the retry budget
	resp, err := t.model.Complete(ctx, req)
	if err != nil {
		return fmt.Errorf("handlers: act: %w", err)
	}
	if len(resp.Message.ToolCalls) > 0 {
		t.say(ctx, runclient.ChunkThought, runclient.ChunkThought, resp.Message.Content)
		return t.callTools(ctx, resp.Message.ToolCalls)
	}
	return t.answer(ctx, resp.Message.Content)
}

// say streams one whole message of msgType, named name among the hop's
// messages, to a run that streams: the model's thoughts and the tool
// results it observes (seed 001's thought and observation messages), as
// they happen. A chunk that cannot be stored is logged: the caller misses
// it, the step goes on.
func (t *turn) say(ctx context.Context, msgType, name, content string) {
	if !t.req.Run.Request.Stream || t.exec.Replies == nil || strings.TrimSpace(content) == "" {
		return
	}
	s := t.exec.Replies.OpenNamed(t.in, msgType, name)
	s.Write(t.withoutSecrets(ctx, content), true)
	if err := s.Wait(ctx); err != nil {
		t.exec.Log.Warn().Err(err).Str("message_type", msgType).Msg("chunk not streamed")
	}
}

// observe streams the result of call c to a run that streams.
func (t *turn) observe(ctx context.Context, c llm.ToolCall, result []byte, isErr bool) {
	if !t.req.Run.Request.Stream || t.exec.Replies == nil {
		return
	}
	o := runclient.Observation{RunID: t.req.Run.Request.RunID, StepIndex: t.step.Index, SkillID: c.Name, CallID: c.ID, IsError: isErr}
	// Secrets out first, so that the cut cannot leave part of one.
	r := []byte(t.withoutSecrets(ctx, string(result)))
	if len(r) > runclient.MaxObservationBytes {
		r, o.Truncated = r[:runclient.MaxObservationBytes], true
	}
	o.Result = string(bytes.ToValidUTF8(r, nil))
	body, _ := json.Marshal(o)
	t.say(ctx, runclient.ChunkObservation, runclient.ChunkObservation+"/"+c.ID, string(body))
}

// maxTurns bounds the step's model turns: a loop step's own bound (the
// pattern's max_iterations), else the executor's.
func (t *turn) maxTurns() int {
	if l := t.step.Loop; l != nil && l.MaxTurns > 0 {
		return l.MaxTurns
	}
	return t.exec.MaxTurns
}

// readInputs starts reading the outputs of the steps this one depends
// on, each by its key, all at once; wait returns them by key, or the
// first key's error.
func (t *turn) readInputs(ctx context.Context) (wait func() (map[string]json.RawMessage, error)) {
	keys := t.req.Inputs
	if len(keys) == 0 {
		return func() (map[string]json.RawMessage, error) { return nil, nil }
	}
	in := make(map[string]json.RawMessage, len(keys))
	var read []string
	for _, key := range keys {
		if v, ok := t.req.InputData[key]; ok {
			in[key] = v // carried from the step's first turn
			continue
		}
		if v := t.req.Run.Plan.Carried(key); v != nil {
			in[key] = v // carried by the run state: a small output
			continue
		}
		read = append(read, key)
	}
	if len(read) == 0 {
		return func() (map[string]json.RawMessage, error) { return in, nil }
	}
	done := make(chan struct{})
	var mems []store.Memory
	var err error
	go func() {
		defer close(done)
		mems, err = memory.ReadMemories(ctx, t.exec.Memory, read)
	}()
	return func() (map[string]json.RawMessage, error) {
		<-done
		if err != nil {
			return nil, fmt.Errorf("handlers: read input: %w", err)
		}
		for i, key := range read {
			in[key] = json.RawMessage(mems[i].Text)
		}
		return in, nil
	}
}

// callTools runs the model's tool calls under the hard limits and emits
// the next turn.
func (t *turn) callTools(ctx context.Context, calls []llm.ToolCall) error {
	turns := slices.Clone(t.req.Turns)
	invalid := ""
	for i, c := range calls {
		turns = append(turns, orch.Turn{Role: "assistant", ToolCallID: c.ID, ToolName: c.Name, ToolArgs: c.Arguments})
		tn, bad, done, err := t.call(ctx, t.req.Iteration*100+i, c, turns)
		if done || err != nil {
			return err
		}
		invalid = cmp.Or(bad, invalid)
		turns = append(turns, tn)
	}
	return t.next(turns, invalid)
}

// call makes one tool call of the turn and returns the tool turn of its
// result, or why its arguments were invalid (the result says so too).
// done reports that the step finished instead: a guard stopped it, its
// skill hung, or the call waits at a gate (the step parks with turns).
func (t *turn) call(ctx context.Context, n int, c llm.ToolCall, turns []orch.Turn) (orch.Turn, string, bool, error) {
	result, isErr, err := t.callTool(ctx, n, c)
	invalid := ""
	var bad *invalidArgs
	if errors.As(err, &bad) {
		invalid, result, isErr, err = bad.Error(), []byte(bad.Error()), true, nil
	}
	if err == nil && invalid == "" {
		err = t.inspect(c, result) // before the model reads it
	}
	var gate *gateStop
	if errors.As(err, &gate) {
		return orch.Turn{}, "", true, t.park(gate, n, turns) // the held call is not made (yet)
	}
	var st *stepStop
	if errors.As(err, &st) {
		t.tally(c.Name, st.res.Outcome != orch.OutcomeHandoff) // refused or guarded, unless it handed off
		// The refused call's own assistant turn is left out: the model
		// asks for it again once the budget is released.
		t.resumeAfterBudget(&st.res, turns[:max(len(turns)-1, 0)], t.req.Iteration+1)
		return orch.Turn{}, "", true, t.finish(st.res)
	}
	var slow *skillTimeout
	if errors.As(err, &slow) {
		t.tally(c.Name, true)
		// A hung skill fails the step at once, so the run replans
		// around it, instead of redelivering the turn into it again.
		return orch.Turn{}, "", true, t.finish(orch.StepResult{Outcome: orch.OutcomeFailed, Reason: slow.Error(),
			Suggestion: "plan around " + slow.skill + ", or with fewer records per call"})
	}
	if err != nil {
		return orch.Turn{}, "", false, err
	}
	t.tally(c.Name, isErr)
	t.observe(ctx, c, result, isErr)
	return orch.Turn{Role: "tool", ToolCallID: c.ID, ToolName: c.Name, Content: string(result), IsError: isErr}, invalid, false, nil
}

// park finishes the step at a gate: the held call is not made; the step
// resumes with it, and with its turns so far, once the run's gate is
// approved.
func (t *turn) park(g *gateStop, n int, turns []orch.Turn) error {
	g.call.N = n
	return t.finish(orch.StepResult{Outcome: orch.OutcomeAwaitingGate, Reason: g.Error(), Evidence: g.evidence,
		Parked: &orch.Parked{Call: g.call, Elicit: g.elicit, Iteration: t.req.Iteration, Turns: turns, Repairs: t.req.Repairs,
			Observed: t.req.Observed + t.observed, Calls: t.callCounts(), Denied: t.req.Denied + t.deniedN,
			Steered: max(t.req.Steered, t.steered), Tainted: t.taintedBy()}})
}

// resume makes the call a step held at its gate, now approved: the gate's
// record must say so (a message claiming an approval it does not have
// fails closed, UNSAFE_DETECTION). Its result is the next turn's.
func (t *turn) resume(ctx context.Context, a orch.Approved) error {
	run := t.req.Run.Request
	if err := t.exec.Gates.CheckApproved(ctx, run.TenantID, run.RunID, t.step.Index, a); err != nil {
		if !errors.Is(err, runctl.ErrNotApproved) {
			return err
		}
		ev := map[string]any{"guard": "unapproved_call", "gate_id": a.Gate, "action": a.Call.Skill, "reason": err.Error()}
		t.out.Audit("guard.unsafe", t.lineage(), ev)
		return stop(orch.OutcomeUnsafe, "unsafe: "+err.Error(), "", ev)
	}
	t.approved = &a
	turns := slices.Clone(t.req.Turns)
	tn, invalid, done, err := t.call(ctx, a.Call.N, llm.ToolCall{ID: a.Call.ID, Name: a.Call.Skill, Arguments: a.Call.Arguments}, turns)
	if done || err != nil {
		return err
	}
	return t.next(append(turns, tn), invalid)
}

// next emits the step's next turn with turns, counting a repair when the
// Turn's tool arguments were invalid.
func (t *turn) next(turns []orch.Turn, invalid string) error {
	next := t.req
	next.Approved = nil
	next.Repairs = 0
	if invalid != "" {
		if t.req.Repairs >= llm.MaxRepairs {
			return t.finish(orch.StepResult{Outcome: orch.OutcomeInvalidOutput,
				Reason:     fmt.Sprintf("tool arguments stayed invalid after %d repairs: %s", llm.MaxRepairs, invalid),
				Suggestion: "use a model that follows the tool's input schema"})
		}
		next.Repairs = t.req.Repairs + 1
	}
	next.Iteration++
	next.Turns = t.compressTurns(turns)
	t.carry(&next)
	t.out.Emit(fmt.Sprintf("turn/%d", next.Iteration), events.TypeStepIterated, next)
	return nil
}

// carry sets what the next turn inherits from this one: usage, draws,
// observations, the loop guard's counts.
func (t *turn) carry(next *orch.StepRequest) {
	next.InputData = carriedInputs(t.inputData)
	next.Usage = t.spent()
	next.Spent = t.spentSoFar()
	next.Pooled = t.budget.Pooled()
	next.Observed = t.req.Observed + t.observed
	next.Calls = t.callCounts()
	next.Denied = t.req.Denied + t.deniedN
	next.Steered = max(t.req.Steered, t.steered)
	next.Tools = t.toolUses()
	next.Tainted = t.taintedBy()
}

// carriedInputs is what of a step's input values its next turn carries:
// all of them when they total at most orch.MaxCarriedInputs bytes, else
// none (the next turn reads them again).
func carriedInputs(in map[string]json.RawMessage) map[string]json.RawMessage {
	n := 0
	for _, v := range in {
		n += len(v)
	}
	if n == 0 || n > orch.MaxCarriedInputs {
		return nil
	}
	return in
}

// tally counts one tool call of this hop, failed or not: the step
// reports its calls by tool name, the run's execution record lists them.
func (t *turn) tally(name string, failed bool) {
	u := t.tools[name]
	u.Calls++
	if failed {
		u.Errors++
	}
	if t.tools == nil {
		t.tools = orch.ToolUses{}
	}
	t.tools[name] = u
}

// toolUses are the step's tool calls after this hop.
func (t *turn) toolUses() orch.ToolUses { return t.req.Tools.Add(t.tools) }

// DefaultSkillTimeout bounds one skill call when Executor.SkillTimeout is
// zero.
const DefaultSkillTimeout = time.Minute

// skillTimeout is a skill call that did not answer within its bound.
type skillTimeout struct {
	skill string
	after time.Duration
	err   error // the tool's own timeout, when it reported one
}

func (e *skillTimeout) Error() string {
	if e.err != nil {
		return "skill_timeout: " + e.err.Error()
	}
	return fmt.Sprintf("skill_timeout: %s did not answer within %s", e.skill, e.after)
}

// invalidArgs reports tool-call arguments that do not validate against
// the tool's input schema: the call is not made, and the model is told
// why (a repair turn).
type invalidArgs struct {
	skill string
	err   error
}

func (e *invalidArgs) Error() string {
	return fmt.Sprintf("invalid arguments for %s: %v; call it again with arguments valid against its input schema", e.skill, e.err)
}

// compress keeps the last keep turns and folds the older ones into a
// single summary turn that counts the calls made per skill. The model sees
// its recent observations; the message size stays bounded.
func compress(turns []orch.Turn, keep int) []orch.Turn {
	if keep <= 0 || len(turns) <= keep+1 {
		return turns
	}
	old, recent := turns[:len(turns)-keep], turns[len(turns)-keep:]
	counts := map[string]int{}
	folded := 0
	for _, tn := range old {
		if tn.Role == "summary" {
			var prev Summary
			if json.Unmarshal([]byte(tn.Content), &prev) == nil {
				for k, v := range prev.Calls {
					counts[k] += v
				}
				folded += prev.Turns
			}
			continue
		}
		folded++
		if tn.Role == "assistant" && tn.ToolName != "" {
			counts[tn.ToolName]++
		}
	}
	b, _ := json.Marshal(Summary{Turns: folded, Calls: counts})
	return append([]orch.Turn{{Role: "summary", Content: string(b)}}, recent...)
}

// Summary is the content of a summary turn.
type Summary struct {
	Turns int            `json:"compressed_turns"`
	Calls map[string]int `json:"calls"`
}

// callTool enforces the step's limits, then calls the skill once per
// idempotency key: a redelivered turn reuses the recorded result.
func (t *turn) callTool(ctx context.Context, n int, c llm.ToolCall) ([]byte, bool, error) {
	lin := t.lineage()
	lin.SkillID = c.Name
	if handled, err := t.handoffCall(c); handled {
		return nil, false, err
	}
	if slices.Contains(spawnTools, c.Name) {
		t.out.Audit("subagent.spawn_denied", lin, map[string]any{"tool": c.Name})
		return []byte(ErrSpawnDenied.Error()), true, nil
	}
	if !slices.Contains(t.step.Skills, c.Name) {
		t.out.Audit("skill.denied", lin, map[string]any{"allowed_skills": t.step.Skills, "reason": "not in allowed_skills"})
		if err := t.denied(c.Name); err != nil {
			return nil, false, err
		}
		return fmt.Appendf(nil, "permission denied: skill %q is not in this step's allowed_skills %v", c.Name, t.step.Skills), true, nil
	}
	if in := t.skills[c.Name].InputSchema; len(in) > 0 {
		if err := schema.Validate(in, c.Arguments); err != nil {
			t.out.Audit("skill.arguments_invalid", lin, map[string]any{"skill_id": c.Name, "reason": err.Error()})
			return nil, false, &invalidArgs{skill: c.Name, err: err}
		}
	}
	hash := ArgsHash(c.Arguments)
	if err := t.guardCall(ctx, c, hash); err != nil {
		return nil, false, err
	}
	key := fmt.Sprintf("%s/%d/%s/%d", t.req.Run.Request.RunID, t.step.Index, t.step.TaskID, n)
	answers := t.answers(c, hash, n)
	if len(answers) > 0 {
		// Each set of answers is a call of its own: the server executes
		// it once, and it is recorded once.
		key += fmt.Sprintf("/answers/%d", len(answers))
	}
	mode := t.mode(c.Name)
	want := orch.Vector{orch.DimToolCalls: 1}
	if t.manifests[c.Name].OpenWorld() || mode == skills.ModeDelegated {
		want[orch.DimExternalCalls] = 1
	}
	if mode != skills.ModeReadOnly {
		want[orch.DimSideEffects] = 1
	}
	// The call is drawn from the budget while its idempotency record, if
	// it has side effects, is looked up. A recorded call (a redelivered
	// Turn) is not made again, so what was just drawn for it is given
	// back; its recorded result wins even when the draw was refused. A
	// read-only call keeps no record: its redelivery simply calls again.
	rec, ok, drawErr := t.recordedDrawing(ctx, key, mode, want)
	if ok {
		if drawErr == nil {
			t.giveBack(ctx, want)
		}
		// Emit the call's audit events again: if the first attempt's
		// outputs were stored, their derived ids make these duplicates;
		// if they were lost, the trace still records the call.
		for _, a := range rec.Audits {
			t.out.Audit(a.Name, a.Lineage, nil)
		}
		if !rec.IsError {
			t.observed++
		}
		t.drawn = t.drawn.Add(rec.Drawn)
		return rec.Result, rec.IsError, nil
	}
	// A recorded call never reaches the breaker: it is asked only once
	// the lookup found no record.
	circuit := t.req.Run.Request.TenantID + "/" + c.Name
	if err := t.exec.Breakers.Allow(circuit); err != nil {
		if drawErr == nil {
			t.giveBack(ctx, want) // the call is not made
		}
		t.out.Audit("circuit.refused", lin, map[string]any{"skill_id": c.Name, "reason": err.Error()})
		return nil, false, stop(orch.OutcomeUnavailable, "unavailable: "+err.Error(), "plan around "+c.Name, map[string]any{
			"skill_id": c.Name, "circuit": ledger.CircuitOpen})
	}
	if err := t.took(want, drawErr); err != nil {
		t.exec.Breakers.Skip(circuit) // no call was made: the trial, if any, is not spent
		return nil, false, err
	}
	audited := len(t.out.Audits)
	start := time.Now()
	timeout := cmp.Or(t.exec.SkillTimeout, DefaultSkillTimeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	elicitor := skills.NewElicitor(answers)
	cctx, endSpan := tracing.Tool(cctx, c.Name, c.ID)
	cctx, endProgress := t.progress(cctx, c, key)
	run := t.req.Run.Request
	cctx = skills.WithCallInfo(cctx, skills.CallInfo{RunID: run.RunID, SessionID: run.SessionID, UserID: run.UserID, CallID: c.ID})
	result, err := t.exec.Skills.Call(skills.WithElicitor(cctx, elicitor), t.req.Run.Request.TenantID, c.Name, c.Arguments, key)
	endProgress(ctx)
	endSpan(err)
	cancel()
	t.circuitDone(ctx, circuit, c.Name, err)
	var asked *skills.ElicitationError
	if errors.As(err, &asked) {
		return nil, false, t.elicited(c, hash, mode, answers, asked.Elicitation)
	}
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		t.out.Audit("skill.timeout", lin, map[string]any{"skill_id": c.Name, "timeout_ms": timeout.Milliseconds()})
		return nil, false, &skillTimeout{skill: c.Name, after: timeout}
	}
	if errors.Is(err, skills.ErrTimeout) { // the tool's own bound (a webhook's timeout_ms)
		t.out.Audit("skill.timeout", lin, map[string]any{"skill_id": c.Name, "reason": err.Error()})
		return nil, false, &skillTimeout{skill: c.Name, err: err}
	}
	if errors.Is(err, skills.ErrPermissionDenied) {
		ev := map[string]any{"skill_id": c.Name, "args_hash": hash, "reason": err.Error()}
		t.out.Audit("skill.refused", lin, ev)
		return nil, false, stop(orch.OutcomePermissionDenied, "permission denied by the Skill Service: "+c.Name, "", ev)
	}
	if d, denied := egress.Denied(err); denied {
		// The egress policy refused the address: no connection was made.
		// The model sees the tool error (egress_denied) and may plan
		// around it; the trail names what was refused.
		t.out.Audit("egress.denied", lin, map[string]any{"skill_id": c.Name, "code": egress.Code, "host": d.Host,
			"address": d.Addr.String(), "range": d.Range})
		if !errors.Is(err, skills.ErrSkillFailed) {
			err = fmt.Errorf("%w: %w", skills.ErrSkillFailed, err)
		}
	}
	isErr := false
	if err != nil {
		if !errors.Is(err, skills.ErrSkillFailed) && !errors.Is(err, skills.ErrSkillNotFound) && !errors.Is(err, skills.ErrInvalidArguments) {
			return nil, false, fmt.Errorf("handlers: call %s: %w", c.Name, err)
		}
		result, isErr = []byte(err.Error()), true
	}
	called := map[string]any{
		"skill_id": c.Name, "tenant_id": t.req.Run.Request.TenantID, "user_id": t.req.Run.Request.UserID,
		"session_id": t.req.Run.Request.SessionID, "input_size_bytes": len(c.Arguments), "response_size_bytes": len(result),
		"args_hash": hash, "tool_registry_version": t.registryVersion(), "approval_mode": mode,
		"duration_ms": time.Since(start).Milliseconds(), "is_error": isErr,
		"large_response_triggered": len(result) >= t.exec.LargeResponse, "ts": time.Now().UTC(),
	}
	if t.exec.Records.Keeps(t.req.Run.Request.TenantID) {
		// The tenant keeps payload records: the arguments and the result,
		// redacted and clipped.
		called["arguments"], called["result"] = llm.PayloadRecord(string(c.Arguments)), llm.PayloadRecord(string(result))
	}
	t.out.Audit("skill.called", lin, called)
	if !isErr && len(result) >= t.exec.LargeResponse {
		if result, isErr, err = t.extractLarge(ctx, c.Name, result); err != nil {
			return nil, false, err
		}
	}
	if mode != skills.ModeReadOnly {
		t.record(ctx, key, toolRecord{Result: result, IsError: isErr, Audits: t.out.AuditsSince(audited), Drawn: want})
	}
	if !isErr {
		t.observed++
	}
	return result, isErr, nil
}

// progress returns ctx asking the skill call key for progress when the
// run streams: each report becomes a tool_progress chunk on REPLY, the
// call's reports one message, its chunk ids derived from the input (a
// redelivered hop that calls again stores none twice). The returned func
// ends the message once the call is over.
func (t *turn) progress(ctx context.Context, c llm.ToolCall, key string) (context.Context, func(context.Context)) {
	if !t.req.Run.Request.Stream || t.exec.Replies == nil {
		return ctx, func(context.Context) {}
	}
	var mu sync.Mutex
	var stream *handlers.ReplyStream
	over := false // a report after the call is dropped
	report := func(p skills.Progress) {
		body, _ := json.Marshal(runclient.ToolProgress{RunID: t.req.Run.Request.RunID, StepIndex: t.step.Index, SkillID: c.Name,
			CallID: c.ID, Progress: p.Progress, Total: p.Total, Message: p.Message})
		mu.Lock()
		defer mu.Unlock()
		if over {
			return
		}
		if stream == nil {
			stream = t.exec.Replies.OpenNamed(t.in, runclient.ChunkToolProgress, runclient.ChunkToolProgress+"/"+key)
		}
		stream.Write(string(body), false)
	}
	return skills.WithProgress(ctx, report), func(ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		if err := stream.Close(ctx); err != nil {
			t.exec.Log.Warn().Err(err).Str("skill_id", c.Name).Msg("tool progress not streamed")
		}
		over = true
	}
}

// circuitDone records a call's result in its skill's circuit: a failure
// of the skill (not of the model's arguments, a refusal, a question to
// the user, nor a call that never reached the skill) counts toward
// opening it. A change of state is audited.
func (t *turn) circuitDone(ctx context.Context, circuit, skill string, err error) {
	if errors.Is(err, skills.ErrNotCalled) || errors.Is(err, egress.ErrDenied) { // an outage or a refusal of ours, not the skill's
		t.exec.Breakers.Skip(circuit)
		return
	}
	ok := err == nil || errors.Is(err, skills.ErrInvalidArguments) || errors.Is(err, skills.ErrSkillNotFound) ||
		errors.Is(err, skills.ErrPermissionDenied) || errors.Is(err, skills.ErrElicitation)
	if st := t.exec.Breakers.Done(circuit, ok); st != "" {
		t.exec.Breakers.Publish(ctx, circuit, st)
		lin := t.lineage()
		lin.SkillID = skill
		t.out.Audit("circuit."+st, lin, map[string]any{"skill_id": skill, "state": st})
	}
}

// toolRecord is an idempotency record of a finished skill call, with the
// audit events the call emitted.
type toolRecord struct {
	Result  []byte                 `json:"result"`
	IsError bool                   `json:"is_error"`
	Audits  []handlers.AuditRecord `json:"audits,omitempty"`
	// Drawn is what the call drew from the run's budget; a reuse counts
	// it as the step's again (it was drawn once).
	Drawn orch.Vector `json:"drawn,omitempty"`
}

func (t *turn) recorded(ctx context.Context, key string) (toolRecord, bool) {
	if t.exec.ToolCalls == nil {
		return toolRecord{}, false
	}
	e, err := t.exec.ToolCalls.Get(ctx, kvs.Key(key))
	if err != nil {
		return toolRecord{}, false
	}
	var rec toolRecord
	return rec, json.Unmarshal(e.Value(), &rec) == nil
}

// recordedDrawing looks up the record of call key, unless its approval
// mode is read-only (such a call keeps none), while it reserves want from
// the run's budget, and returns both outcomes: the reservation's refusal
// as the ledger gave it (reserve), not yet booked (took).
func (t *turn) recordedDrawing(ctx context.Context, key, mode string, want orch.Vector) (toolRecord, bool, error) {
	if t.exec.ToolCalls == nil || mode == skills.ModeReadOnly {
		return toolRecord{}, false, t.reserve(ctx, want)
	}
	type found struct {
		rec toolRecord
		ok  bool
	}
	lookup := make(chan found, 1)
	go func() {
		rec, ok := t.recorded(ctx, key)
		lookup <- found{rec, ok}
	}()
	err := t.reserve(ctx, want)
	f := <-lookup
	return f.rec, f.ok, err
}

// record stores the idempotency record of call key. The write is not
// awaited here: the worker awaits it after the hop's outputs are
// published and before its input is acked (events.Defer), so it is
// stored before the input is acked, and a redelivery (a lost ack, a
// later failure of the hop) finds it; outside a worker it is awaited at
// once. A failed write is logged and the hop goes on: a redelivery may
// then call the skill again (failing the hop instead would redeliver it
// without the record, and call the skill again for sure).
func (t *turn) record(ctx context.Context, key string, rec toolRecord) {
	if t.exec.ToolCalls == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.exec.Log.Warn().Err(err).Msg("tool call not recorded; a redelivery may call the skill again")
		return
	}
	done := make(chan error, 1)
	go func() {
		// Not the turn's context: that ends with the handler, and the
		// write may outlast it.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), events.CallTimeout)
		defer cancel()
		_, err := t.exec.ToolCalls.Put(pctx, kvs.Key(key), b)
		done <- err
	}()
	log := t.exec.Log
	wait := func(ctx context.Context) error {
		select {
		case err := <-done:
			if err != nil {
				log.Warn().Err(err).Msg("tool call not recorded; a redelivery may call the skill again")
			}
			return nil
		case <-ctx.Done():
			return ctx.Err() // not known to be stored: the input is not acked
		}
	}
	if !events.Defer(ctx, wait) {
		_ = wait(ctx)
	}
}

func toMessages(turns []orch.Turn) []llm.Message {
	msgs := make([]llm.Message, 0, len(turns))
	for _, tn := range turns {
		if tn.Role == "summary" {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "Earlier turns, summarised: " + tn.Content})
			continue
		}
		if tn.Role == "user" {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: tn.Content})
			continue
		}
		if tn.Role == "tool" {
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tn.ToolCallID, Content: tn.Content, IsError: tn.IsError})
			continue
		}
		m := llm.Message{Role: llm.RoleAssistant, Content: tn.Content}
		if tn.ToolName != "" {
			m.ToolCalls = []llm.ToolCall{{ID: tn.ToolCallID, Name: tn.ToolName, Arguments: tn.ToolArgs}}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// SkillCaller is what the executor needs from the Skill Service.
type SkillCaller interface {
	Load(ctx context.Context, tenant, name string) (skills.Manifest, error)
	Call(ctx context.Context, tenant, name string, args json.RawMessage, idempotencyKey string) ([]byte, error)
}
