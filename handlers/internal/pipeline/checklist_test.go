package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/aggregator"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/handlers/internal/kvs"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/handlers/planner"
	"github.com/agentbus/agentbus/handlers/projector"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/llmtest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// One named test per item of seed 000 §12 ("Core flow", "Boundaries",
// "Memory & contracts", "Replanning"). Each test's name says which
// checklist item it proves. Everything runs against a real in-process NATS
// JetStream and the real demo Skill Service over MCP; only the LLM is
// scripted (or the deterministic offline model). The two Boundaries items
// about one executor turn's tool calls are tested beside the executor
// (handlers/executor/executor_boundaries_test.go), and the large-response
// Core flow item too (executor_large_test.go).

// ---------------------------------------------------------------------------
// Shared helpers of the checklist tests.

// flow is one set of role handlers wired the way cmd/* wires them.
type flow struct {
	router  *router.Router
	planner *planner.Planner
	exec    *executor.Executor
	agg     *aggregator.Aggregator
	proj    *projector.Projector
	// maxEvents bounds the events one drive handles; default 500.
	maxEvents int
	// redeliveries is how many failed hops a drive delivers again, as
	// the broker would after a transient failure; past them a failure
	// fails the test.
	redeliveries int
	// runs is how many runs one drive finishes (default 1: the first
	// event's); finished are their results, in the order they ended.
	runs     int
	finished []orch.RunResult
	// carriers are the carriers of the router's trails, which the
	// projector's plan.projected events refer to.
	carriers handlerstest.Carriers
}

// route is the router's handler, with the carriers of its trails kept.
func (f *flow) route(ctx context.Context, ev event.Event) ([]event.Event, error) {
	outs, err := f.router.Handle(ctx, ev)
	return f.carriers.Add(outs), err
}

// project is the projector's handler, given the carrier of its event's
// trail as the worker would.
func (f *flow) project(ctx context.Context, ev event.Event) ([]event.Event, error) {
	return f.proj.Handle(f.carriers.Ctx(ctx, ev), ev)
}

// newFlow wires every role on st: the handlers see only the store
// interfaces they declare.
func newFlow(t *testing.T, env *handlerstest.Env, st interface {
	router.RouterStore
	memory.MemoryStore
	projector.ProjectionStore
}) *flow {
	t.Helper()
	if err := router.SeedConfig(handlerstest.Ctx(t), env.Config); err != nil {
		t.Fatalf("SeedConfig: %v", err)
	}
	f := &flow{
		router:  router.NewRouter(offline.New(), st, env.Config, handlerstest.NopLog),
		planner: planner.NewPlanner(offline.New(), env.Skills, handlerstest.NopLog),
		exec:    executor.NewExecutor(offline.New(), env.Skills, st, env.Locks, env.Toolcalls, handlerstest.NopLog),
		agg:     aggregator.NewAggregator(env.Fanin, handlerstest.NopLog),
		proj:    &projector.Projector{Store: st, Embedder: handlerstest.Embedder},
	}
	f.router.Sessions, f.router.Locks = &runctl.Sessions{KV: env.Sessions}, env.Locks
	f.router.JS = env.JS // the config bucket read in one request, as the roles do
	f.exec.Writer.Embedder = handlerstest.Embedder
	f.router.Budgets, f.planner.Budgets, f.exec.Budgets = env.Budgets, env.Budgets, env.Budgets
	f.exec.Breakers = &ledger.Breakers{}
	f.router.Gates, f.exec.Gates = env.Gates, env.Gates
	return f
}

// drive feeds first into its handler and every output into the next one
// by calling Handle directly, until the run finishes. It returns the run's
// result and every event handled, in order.
func (f *flow) drive(t *testing.T, first event.Event) (orch.RunResult, []event.Event) {
	t.Helper()
	ctx := handlerstest.Ctx(t)
	queue := []event.Event{first}
	var seen []event.Event
	var results []orch.RunResult
	var deadlines, runDeadlines, expiries []event.Event
	for len(queue) > 0 || len(results) == 0 && len(expiries) > 0 {
		if len(queue) == 0 {
			// The run waits at a gate with nothing in flight: nobody
			// decides, and its TTL passes.
			for _, ev := range expiries {
				queue = append(queue, delivered(ev))
			}
			expiries = nil
		}
		if len(seen) > cmp.Or(f.maxEvents, 500) {
			t.Fatalf("the run did not finish after %d events: %v", len(seen), handlerstest.Types(seen))
		}
		ev := queue[0]
		queue = queue[1:]
		seen = append(seen, ev)
		var h func(context.Context, event.Event) ([]event.Event, error)
		switch typ := ev.Type(); {
		case strings.HasPrefix(typ, events.TypeAuditPrefix):
			h = f.project
		case typ == events.TypeRunRequested || typ == events.TypePlanProposed || typ == events.TypeGroupJoined ||
			typ == events.TypeStepJoined:
			h = f.route
		case typ == events.TypePlanRequested:
			h = f.planner.Handle
		case typ == events.TypeStepRequested || typ == events.TypeStepIterated:
			h = f.exec.Handle
		case typ == events.TypeStepFinished:
			h = f.agg.Handle
		case typ == events.TypeRunFinished:
			results = append(results, handlerstest.Decode[orch.RunResult](t, ev))
			continue
		case typ == events.TypeReplyChunk || typ == events.TypeRunParked:
			continue // the REPLY stream's readers are callers, not roles
		case typ == events.TypeApprovalDecided && ev.Extensions()[events.ExtDeliverAt] != nil:
			expiries = append(expiries, ev)
			continue
		case typ == events.TypeApprovalDecided:
			h = f.route
		case typ == events.TypeRunDeadline:
			runDeadlines = append(runDeadlines, ev)
			continue
		case typ == events.TypeGroupDeadline:
			// A scheduled message: delivered once the run is over, as
			// the server would deliver it after the group joined.
			deadlines = append(deadlines, ev)
			continue
		default:
			t.Fatalf("no handler for %s", typ)
		}
		outs, err := h(ctx, ev)
		if err != nil && f.redeliveries > 0 && !events.IsPermanent(err) {
			f.redeliveries--
			queue = append([]event.Event{ev}, queue...)
			continue
		}
		if err != nil {
			t.Fatalf("Handle %s: %v", ev.Type(), err)
		}
		handlerstest.CheckOutputsOf(t, outs, events.MetaOf(first).Tenant)
		queue = append(queue, outs...)
	}
	if want := cmp.Or(f.runs, 1); len(results) != want {
		t.Fatalf("got %d run.finished, want exactly %d (events %v)", len(results), want, handlerstest.Types(seen))
	}
	f.finished = results
	for _, ev := range runDeadlines {
		// Delivered long after the run: the router leaves it alone.
		if outs, err := f.router.Handle(ctx, ev); err != nil || len(outs) != 0 {
			t.Fatalf("the deadline of a finished run: outputs %v, %v", handlerstest.Types(outs), err)
		}
	}
	for _, ev := range deadlines {
		if outs, err := f.agg.Handle(ctx, ev); err != nil || len(outs) != 0 {
			t.Fatalf("the deadline of a joined group: outputs %v, %v", handlerstest.Types(outs), err)
		}
	}
	return results[0], seen
}

// recordingFinder is the real Skill Service client with the planner's
// find_relevant_skills and load_skill calls recorded.
type recordingFinder struct {
	inner planner.SkillFinder
	mu    sync.Mutex
	finds []findCall
	loads []string
	// found is every candidate find_relevant_skills returned; loaded
	// every manifest load_skill returned.
	found  []skills.Summary
	loaded map[string]skills.Manifest
}

type findCall struct {
	tenant, query string
	limit         int
}

func (r *recordingFinder) Find(ctx context.Context, tenant, query string, limit int) ([]skills.Summary, error) {
	res, err := r.inner.Find(ctx, tenant, query, limit)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finds = append(r.finds, findCall{tenant, query, limit})
	r.found = append(r.found, res...)
	return res, err
}

func (r *recordingFinder) Load(ctx context.Context, tenant, name string) (skills.Manifest, error) {
	m, err := r.inner.Load(ctx, tenant, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loads = append(r.loads, name)
	if err == nil {
		if r.loaded == nil {
			r.loaded = map[string]skills.Manifest{}
		}
		r.loaded[m.Name] = m
	}
	return m, err
}

func schemaOf(t *testing.T, raw json.RawMessage) schema.Shape {
	t.Helper()
	s, err := schema.ParseShape(raw)
	if err != nil {
		t.Fatalf("ParseShape(%s): %v", raw, err)
	}
	return s
}

// lockReleased waits for the lock of key to be released: the router
// releases it without waiting for the delete.
func lockReleased(t *testing.T, env *handlerstest.Env, key string) error {
	t.Helper()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err = env.Locks.Get(handlerstest.Ctx(t), kvs.Key(key)); errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
	}
	return fmt.Errorf("lock of %s still held: %v", key, err)
}

// ---------------------------------------------------------------------------
// Core flow.

// Checklist: "SubAgent-A calls find_relevant_skills and load_skill via MCP,
// reranks, runs verification pass, returns plan with return_specs".
func TestCoreFlow_PlannerDiscoversLoadsRerankVerifies(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	rf := &recordingFinder{inner: env.Skills}
	model := handlerstest.Recording()
	p := planner.NewPlanner(model, rf, handlerstest.NopLog)
	run := handlerstest.PlanRun("run-core-plan", handlerstest.RankTask)
	outs, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "plan-req-core", events.TypePlanRequested, orch.PlanRequest{Run: run}))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	handlerstest.CheckOutputs(t, outs)
	prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, outs, events.TypePlanProposed))
	if prop.Infeasible != "" {
		t.Fatalf("Infeasible = %q", prop.Infeasible)
	}

	// find_relevant_skills: once, with the task, for the run's tenant.
	if len(rf.finds) != 1 {
		t.Fatalf("find_relevant_skills called %d times, want 1", len(rf.finds))
	}
	if f := rf.finds[0]; f.query != handlerstest.RankTask || f.tenant != handlerstest.Tenant || f.limit < 2 {
		t.Errorf("find_relevant_skills(%q, %q, %d), want the task for tenant %s", f.tenant, f.query, f.limit, handlerstest.Tenant)
	}
	// load_skill: 2–6 of the candidates, each once.
	if n := len(rf.loads); n < 2 || n > 6 {
		t.Fatalf("load_skill called for %d candidates %v, want 2–6", n, rf.loads)
	}
	var candidates []string
	for _, s := range rf.found {
		candidates = append(candidates, s.Name)
	}
	for i, name := range rf.loads {
		if !slices.Contains(candidates, name) {
			t.Errorf("loaded %s, which find_relevant_skills did not return (%v)", name, candidates)
		}
		if slices.Contains(rf.loads[:i], name) {
			t.Errorf("loaded %s twice", name)
		}
	}
	// The model reranks over the loaded manifests, schemas included.
	in, ok := model.Requests()[0].Input.(llm.PlanInput)
	if !ok {
		t.Fatalf("model input %T, want llm.PlanInput", model.Requests()[0].Input)
	}
	var offered []string
	for _, s := range in.Skills {
		offered = append(offered, s.Name)
		if len(s.InputSchema) == 0 || len(s.OutputSchema) == 0 {
			t.Errorf("skill %s offered without schemas", s.Name)
		}
	}
	if !slices.Equal(offered, rf.loads) {
		t.Errorf("model offered %v, want the loaded skills %v", offered, rf.loads)
	}
	if in.Task != handlerstest.RankTask || in.MaxSteps != orch.MaxPlanSteps {
		t.Errorf("plan input task %q max_steps %d", in.Task, in.MaxSteps)
	}

	// The plan: at most 10 steps, every skill loaded, every return_spec
	// derivable from its skill's output schema.
	if len(prop.Steps) == 0 || len(prop.Steps) > 10 {
		t.Fatalf("plan has %d steps, want 1–10", len(prop.Steps))
	}
	byIndex := map[int]orch.Step{}
	for _, s := range prop.Steps {
		byIndex[s.Index] = s
		if len(s.Skills) == 0 || s.Status != orch.StepPending || s.Task == "" {
			t.Errorf("step %+v is not a pending step with skills", s)
			continue
		}
		for _, name := range s.Skills {
			if _, ok := rf.loaded[name]; !ok {
				t.Errorf("step %d uses %s, which was not loaded", s.Index, name)
			}
		}
		m := rf.loaded[s.Skills[0]]
		if _, err := schema.Derive(schemaOf(t, m.OutputSchema), schemaOf(t, s.ReturnSpec.Shape)); err != nil {
			t.Errorf("step %d return_spec %s is not derivable from %s's output: %v", s.Index, s.ReturnSpec.Shape, m.Name, err)
		}
		if s.ReturnSpec.Reason == "" {
			t.Errorf("step %d return_spec has no reason", s.Index)
		}
	}
	// A step that feeds another returns only what its consumer needs.
	feeders := 0
	for _, consumer := range prop.Steps {
		for _, d := range consumer.DependsOn {
			producer, ok := byIndex[d]
			if !ok || d >= consumer.Index {
				t.Fatalf("step %d depends on %d, not an earlier step of the plan", consumer.Index, d)
			}
			feeders++
			shape := schemaOf(t, producer.ReturnSpec.Shape)
			if got := slices.Sorted(maps.Keys(shape.Properties)); !slices.Equal(got, []string{"outlet_ids"}) || !slices.Equal(shape.Required, []string{"outlet_ids"}) {
				t.Errorf("step %d feeds step %d with return_spec fields %v required %v, want only outlet_ids",
					producer.Index, consumer.Index, got, shape.Required)
			}
			needs := schemaOf(t, rf.loaded[consumer.Skills[0]].InputSchema)
			if !slices.Contains(needs.Required, "outlet_ids") {
				t.Errorf("consumer %s does not need outlet_ids: %v", consumer.Skills[0], needs.Required)
			}
		}
	}
	if feeders == 0 {
		t.Fatalf("no step feeds another: %+v", prop.Steps)
	}

	// The verification pass rejects a plan the skills cannot satisfy.
	t.Run("verification pass", func(t *testing.T) {
		cases := []struct{ name, plan, want string }{
			{"return_spec not derivable", `{"steps":[{"step":1,"task":"t","skills":["outlet_list"],"return_spec":{"shape":` +
				`{"type":"object","properties":{"revenue":{"type":"number"}},"required":["revenue"]}}}]}`, `field "revenue"`},
			{"skill never loaded", `{"steps":[{"step":1,"task":"t","skills":["acme_loyalty_report"],"return_spec":{"shape":{"type":"object"}}}]}`,
				`unknown skill "acme_loyalty_report"`},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				// The model keeps proposing the same plan: every repair
				// turn quotes the verification error, then the run ends
				// VALIDATION_FAIL.
				model := handlerstest.Repeating(handlerstest.TextResp(tc.plan))
				p := planner.NewPlanner(model, env.Skills, handlerstest.NopLog)
				outs, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "plan-verify-"+tc.name, events.TypePlanRequested, orch.PlanRequest{Run: run}))
				if err != nil {
					t.Fatalf("Handle: %v", err)
				}
				prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, outs, events.TypePlanProposed))
				if len(prop.Steps) != 0 || prop.Code != orch.CodeValidationFail || !strings.Contains(prop.Infeasible, tc.want) {
					t.Errorf("proposal steps %d code %q reason %q, want it rejected with %q", len(prop.Steps), prop.Code, prop.Infeasible, tc.want)
				}
				reqs := model.Requests()
				if len(reqs) != 1+llm.MaxRepairs || !strings.Contains(handlerstest.LastMessage(reqs[1]), tc.want) {
					t.Errorf("model asked %d times; the repair turn must quote %q", len(reqs), tc.want)
				}
			})
		}
		// More than 10 steps never becomes a plan: the plan schema
		// (maxItems 10) sends it back for repair, then the run ends
		// VALIDATION_FAIL instead of a redelivery.
		t.Run("eleven steps", func(t *testing.T) {
			eleven := handlerstest.TextResp(elevenSteps())
			model := llmtest.Sequence(eleven, eleven, eleven)
			p := planner.NewPlanner(model, env.Skills, handlerstest.NopLog)
			outs, err := p.Handle(handlerstest.Ctx(t), handlerstest.NewEvent(t, "plan-verify-eleven", events.TypePlanRequested, orch.PlanRequest{Run: run}))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, outs, events.TypePlanProposed))
			if len(prop.Steps) != 0 || prop.Code != orch.CodeValidationFail || !strings.Contains(prop.Infeasible, "maxItems") {
				t.Fatalf("proposal steps %d code %q reason %q, want VALIDATION_FAIL", len(prop.Steps), prop.Code, prop.Infeasible)
			}
			if len(model.Requests()) != 1+llm.MaxRepairs {
				t.Errorf("model asked %d times, want 1 + %d repairs", len(model.Requests()), llm.MaxRepairs)
			}
		})
	})
}

func elevenSteps() string {
	var steps []string
	for i := 1; i <= 11; i++ {
		steps = append(steps, fmt.Sprintf(`{"step":%d,"task":"t","skills":["outlet_list"],"return_spec":{"shape":%s}}`, i, handlerstest.OutletIDsShape))
	}
	return `{"steps":[` + strings.Join(steps, ",") + `]}`
}

// Checklist: "SubAgent-B executes one step, ... validates output against
// return_spec before write_memory". (The large-response path is covered
// elsewhere.)
func TestCoreFlow_ExecutorValidatesBeforeWriteMemory(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	cases := []struct {
		name  string
		data  any
		valid bool
	}{
		{"data that fails the return_spec", map[string]any{"outlet_ids": "out-001"}, false},
		{"data that matches the return_spec", map[string]any{"outlet_ids": []string{"out-001", "out-002"}}, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := llmtest.Sequence(
				handlerstest.ToolCallResp("c1", demo.SkillOutletList, `{"status":"active"}`),
				handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids", "data": tc.data}),
			)
			x := handlerstest.NewExecutor(env, model, env.Toolcalls)
			req := handlerstest.ExecRequest(fmt.Sprintf("run-validate-%d", i), 1)
			req.Run.Plan.Steps[0].TaskID = fmt.Sprintf("task-validate-%d", i)
			req.Group.Expected = 2 // a member of a group of several: its key is locked
			key := memory.MemoryScope{TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, TaskID: req.Run.Plan.Steps[0].TaskID}.Key("outlet_ids")

			// Turn 1 calls the skill; nothing is written yet.
			itEv := handlerstest.Only(t, handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, fmt.Sprintf("step-validate-%d", i), events.TypeStepRequested, req)), events.TypeStepIterated)
			handlerstest.AssertNoMemory(t, env, key)
			// Turn 2 answers: checked against the return_spec, then written.
			outs := handlerstest.HandleStep(t, x, itEv)
			sf := handlerstest.Finished(t, outs)
			if !tc.valid {
				if sf.Result.Outcome != orch.OutcomeContractViolation || sf.Result.Validated || sf.Result.MemoryKey != "" {
					t.Fatalf("result = %+v, want contract_violation, not validated, no key", sf.Result)
				}
				handlerstest.AssertNoMemory(t, env, key)
				if handlerstest.LockTaken(t, env, key) {
					t.Error("the memory lock was taken for data that failed validation: validation must come first")
				}
				if slices.Contains(handlerstest.AuditNames(outs), "memory.written") {
					t.Error("memory.written audited for data that failed validation")
				}
				_, cv := handlerstest.AuditOf(t, outs, "contract_violation")
				exp, _ := json.Marshal(cv["expected_shape"])
				act, _ := json.Marshal(cv["actual_shape"])
				handlerstest.AssertJSON(t, exp, handlerstest.OutletIDsShape)
				handlerstest.AssertJSON(t, act, `{"outlet_ids":"string"}`)
				return
			}
			if sf.Result.Outcome != orch.OutcomeComplete || !sf.Result.Validated || sf.Result.MemoryKey != key {
				t.Fatalf("result = %+v, want complete, validated, under %s", sf.Result, key)
			}
			m, err := env.Store.GetMemory(handlerstest.Ctx(t), key)
			if err != nil {
				t.Fatalf("GetMemory: %v", err)
			}
			handlerstest.AssertJSON(t, []byte(m.Text), `{"outlet_ids":["out-001","out-002"]}`)
			if owner := handlerstest.LockOwner(t, env, key); owner != req.Run.Plan.Steps[0].TaskID {
				t.Errorf("after the write the lock is held by %q, want the writing task until the router reads", owner)
			}
			memory.ReleaseMemoryLocks(handlerstest.Ctx(t), env.Locks, req.Group, []orch.StepResult{sf.Result})
			if err := lockReleased(t, env, key); err != nil {
				t.Errorf("after the router's confirmation: %v", err)
			}
			if _, w := handlerstest.AuditOf(t, outs, "memory.written"); w["key"] != key || w["validated"] != true {
				t.Errorf("memory.written audit = %v", w)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Boundaries.

// Checklist: "Storage Adapter is swapped to a different backend without
// touching AgentCore code". The same handler code runs a whole run against
// the embedded JetStream store and against a map-based store.
func TestBoundaries_StorageAdapterSwapNeedsNoHandlerChange(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	backends := []struct {
		name string
		st   interface {
			router.RouterStore
			memory.MemoryStore
			projector.ProjectionStore
			projector.PlanStore
		}
	}{
		{"embedded", env.Store},
		{"map", newMapStore()},
	}
	responses := map[string]string{}
	planIDs := map[string]string{}
	var mapKeys []string
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f := newFlow(t, env, b.st)
			runID := "run-swap-" + b.name
			res, seen := f.drive(t, handlerstest.NewEvent(t, runID, events.TypeRunRequested, handlerstest.RunRequest(runID, handlerstest.RankTask)))
			if res.TerminalCode != orch.CodeSuccess || res.Status != orch.PlanComplete {
				t.Fatalf("run finished %s/%s (%s), want SUCCESS/complete", res.TerminalCode, res.Status, res.Reason)
			}
			if res.Response == "" || !strings.Contains(res.Response, "out-") {
				t.Errorf("response %q carries no ranked outlet", res.Response)
			}
			responses[b.name], planIDs[b.name] = res.Response, res.PlanID
			// Every group of this plan has one member, which joins it
			// itself: no step.finished hop.
			for _, want := range []string{events.TypePlanRequested, events.TypePlanProposed, events.TypeStepRequested,
				events.TypeStepIterated, events.TypeStepJoined} {
				if !slices.Contains(handlerstest.Types(seen), want) {
					t.Errorf("the run never passed through %s", want)
				}
			}
			// The backend holds the run's plan, step outputs and trace.
			ctx := handlerstest.Ctx(t)
			p, _, err := b.st.GetPlan(ctx, res.TenantID, res.PlanID)
			if err != nil || p.Status != store.PlanStatusComplete || len(p.Steps) != 2 {
				t.Fatalf("plan projection = %+v (%v), want complete with 2 steps", p, err)
			}
			for _, s := range res.Steps {
				m, err := b.st.GetMemory(ctx, s.MemoryKey)
				if err != nil || !s.Validated {
					t.Fatalf("step %d output %q: %v (validated %v)", s.Index, s.MemoryKey, err, s.Validated)
				}
				if m.TenantID != handlerstest.Tenant || m.SessionID != handlerstest.Session || m.TaskID != s.TaskID {
					t.Errorf("memory %s scope = %s/%s/%s", s.MemoryKey, m.TenantID, m.SessionID, m.TaskID)
				}
				if b.name == "map" {
					mapKeys = append(mapKeys, s.MemoryKey)
				}
			}
			trace, err := b.st.Trace(ctx, store.TraceQuery{TenantID: handlerstest.Tenant, PlanID: res.PlanID})
			if err != nil {
				t.Fatalf("Trace: %v", err)
			}
			var names []string
			for _, ev := range trace {
				names = append(names, ev.EventType)
			}
			for _, want := range []string{"routing.decided", "plan.proposed", "skill.called", "memory.written", "run.finished"} {
				if !slices.Contains(names, want) {
					t.Errorf("trace %v lacks %s", names, want)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	if responses["embedded"] != responses["map"] {
		t.Errorf("responses differ:\nembedded: %q\nmap:      %q", responses["embedded"], responses["map"])
	}
	// The map run never touched the embedded store.
	ctx := handlerstest.Ctx(t)
	if _, _, err := env.Store.GetPlan(ctx, handlerstest.Tenant, planIDs["map"]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the map-backed run's plan reached the embedded store: %v", err)
	}
	for _, key := range mapKeys {
		handlerstest.AssertNoMemory(t, env, key)
	}
}

// ---------------------------------------------------------------------------
// Memory & contracts.

// Checklist: "Two concurrent sessions writing to the same user memory do
// not collide — locking prevents race".
func TestMemory_ConcurrentSessionsDoNotCollide(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	w := &memory.MemoryWriter{Store: env.Store, Locks: env.Locks}
	const perSession, label = 20, "outlet_ids"
	sessions := []string{"sess-a", "sess-b"}
	type write struct {
		scope memory.MemoryScope
		data  string
		key   string
		err   error
	}
	writes := make([]write, 0, len(sessions)*perSession)
	for _, sess := range sessions {
		for i := range perSession {
			scope := memory.MemoryScope{TenantID: handlerstest.Tenant, SessionID: sess, TaskID: fmt.Sprintf("task-%s-%02d", sess, i),
				UserID: handlerstest.User, PlanID: "plan-" + sess, StepIndex: 1, Shared: true}
			writes = append(writes, write{scope: scope,
				data: fmt.Sprintf(`{"outlet_ids":["%s-%02d-first","%s-%02d-second"]}`, sess, i, sess, i)})
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writes {
		wg.Go(func() {
			<-start
			wr := &writes[i]
			wr.key, _, wr.err = w.Write(ctx, wr.scope, label, json.RawMessage(wr.data), json.RawMessage(handlerstest.OutletIDsShape))
		})
	}
	close(start)
	wg.Wait()

	keys := map[string]bool{}
	for _, wr := range writes {
		if wr.err != nil {
			t.Errorf("Write(%s/%s): %v", wr.scope.SessionID, wr.scope.TaskID, wr.err)
			continue
		}
		if want := handlerstest.Tenant + ":" + wr.scope.SessionID + ":" + wr.scope.TaskID + ":" + label; wr.key != want {
			t.Errorf("key %q, want %q", wr.key, want)
		}
		if keys[wr.key] {
			t.Errorf("two writers got key %q", wr.key)
		}
		keys[wr.key] = true
		m, err := env.Store.GetMemory(ctx, wr.key)
		if err != nil {
			t.Errorf("GetMemory(%s): %v", wr.key, err)
			continue
		}
		if m.Text != wr.data {
			t.Errorf("memory %s = %q, want exactly what its writer wrote %q", wr.key, m.Text, wr.data)
		}
		if m.SessionID != wr.scope.SessionID || m.TaskID != wr.scope.TaskID || m.UserID != handlerstest.User || m.TenantID != handlerstest.Tenant {
			t.Errorf("memory %s scope = %s/%s/%s/%s", wr.key, m.TenantID, m.SessionID, m.TaskID, m.UserID)
		}
		if !handlerstest.LockTaken(t, env, wr.key) {
			t.Errorf("write of %s did not go through the locks bucket", wr.key)
		}
	}
	if len(keys) != len(writes) {
		t.Errorf("%d distinct keys for %d writes", len(keys), len(writes))
	}
	// Every lock is held by its writer until the router confirms the
	// step's result, then released.
	var results []orch.StepResult
	for _, wr := range writes {
		if owner := handlerstest.LockOwner(t, env, wr.key); owner != wr.scope.TaskID {
			t.Errorf("lock of %s held by %q, want %q", wr.key, owner, wr.scope.TaskID)
		}
		results = append(results, orch.StepResult{TaskID: wr.scope.TaskID, MemoryKey: wr.key})
	}
	memory.ReleaseMemoryLocks(ctx, env.Locks, orch.Group{ID: "grp-many", Expected: len(results)}, results)
	for _, wr := range writes {
		if err := lockReleased(t, env, wr.key); err != nil {
			t.Errorf("after the router's confirmation: %v", err)
		}
	}
}

// refusedLocks is a lock bucket that closes refused when a Create first
// finds the key held.
type refusedLocks struct {
	jetstream.KeyValue
	once    sync.Once
	refused chan struct{}
}

func (l *refusedLocks) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := l.KeyValue.Create(ctx, key, value, opts...)
	if errors.Is(err, jetstream.ErrKeyExists) {
		l.once.Do(func() { close(l.refused) })
	}
	return rev, err
}

// Checklist (same item): the lock serialises two writers of one namespaced
// key: the second waits until the first releases (seed 000 §4.2).
func TestMemory_LockSerialisesWritersOfOneKey(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	w := &memory.MemoryWriter{Store: env.Store, Locks: env.Locks, LockWait: 300 * time.Millisecond}
	scope := handlerstest.MemScope("task-1")
	key := scope.Key("outlet_ids")
	data, shape := json.RawMessage(handlerstest.OutletIDsData), json.RawMessage(handlerstest.OutletIDsShape)

	// Another task holds the key, the way lock() takes it.
	if _, err := env.Locks.Create(ctx, kvs.Key(key), []byte("task-other")); err != nil {
		t.Fatalf("take lock: %v", err)
	}
	got, waited, err := w.Write(ctx, scope, "outlet_ids", data, shape)
	if !errors.Is(err, memory.ErrMemoryLock) {
		t.Fatalf("Write err = %v, want ErrMemoryLock", err)
	}
	if got != "" || waited < 300*time.Millisecond || waited > 5*time.Second {
		t.Errorf("key %q waited %s, want no key after waiting about 300ms", got, waited)
	}
	if _, err := env.Store.GetMemory(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMemory err = %v, want nothing written under a held lock", err)
	}
	if e, err := env.Locks.Get(ctx, kvs.Key(key)); err != nil || string(e.Value()) != "task-other" {
		t.Fatalf("the failed writer disturbed the holder's lock: %v", err)
	}

	// A different key is not blocked by it.
	if _, _, err := w.Write(ctx, scope, "other_ids", json.RawMessage(`{}`), json.RawMessage(`{"type":"object"}`)); err != nil {
		t.Errorf("Write of another key: %v", err)
	}

	// The holder releases while a writer waits: the writer gets it, and
	// writes only after the release.
	locks := &refusedLocks{KeyValue: env.Locks, refused: make(chan struct{})}
	release := make(chan struct{})
	var releasedAt time.Time
	go func() {
		defer close(release)
		<-locks.refused // the writer waits
		releasedAt = time.Now()
		_ = env.Locks.Delete(ctx, kvs.Key(key))
	}()
	patient := &memory.MemoryWriter{Store: env.Store, Locks: locks, LockWait: 5 * time.Second}
	start := time.Now()
	got, waited, err = patient.Write(ctx, scope, "outlet_ids", data, shape)
	<-release
	if err != nil || got != key {
		t.Fatalf("Write after release = %q, %v", got, err)
	}
	if waited < releasedAt.Sub(start) {
		t.Errorf("waited %s, want it to have waited for the release %s after it began", waited, releasedAt.Sub(start))
	}
	m, err := env.Store.GetMemory(ctx, key)
	if err != nil {
		t.Fatalf("GetMemory: %v", err)
	}
	if m.CreatedAt.Before(releasedAt) {
		t.Errorf("the waiting writer wrote at %s, before the holder released at %s", m.CreatedAt, releasedAt)
	}
	// The writer holds the lock until the router has the step's result.
	if owner := handlerstest.LockOwner(t, env, key); owner != "task-1" {
		t.Errorf("after the write the lock is held by %q, want task-1", owner)
	}

	// The same task re-enters a lock it holds (a redelivered step).
	got, waited, err = w.Write(ctx, scope, "outlet_ids", json.RawMessage(`{"outlet_ids":["out-009"]}`), shape)
	if err != nil || got != key {
		t.Fatalf("re-entrant Write = %q, %v", got, err)
	}
	if waited >= 300*time.Millisecond {
		t.Errorf("re-entry waited %s", waited)
	}
	if m, err := env.Store.GetMemory(ctx, key); err != nil || m.Text != `{"outlet_ids":["out-009"]}` {
		t.Errorf("memory after re-entry = %q, %v", m.Text, err)
	}
}

// Checklist: "write_memory rejects output that does not match return_spec —
// Orchestrator treats this as step failure".
func TestMemory_ContractViolationIsStepFailureForOrchestrator(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	prEv, pr := handlerstest.StartRun(t, r, "run-cv")
	s1Ev := handlerstest.Only(t, handlerstest.Propose(t, r, prEv, pr.Run, handlerstest.TwoSteps()), events.TypeStepRequested)
	s1 := handlerstest.Decode[orch.StepRequest](t, s1Ev)
	step1 := handlerstest.StepOf(t, s1.Run.Plan, 1)

	// The executor runs the dispatched step; the model's data breaks the contract.
	model := llmtest.Sequence(
		handlerstest.ToolCallResp("c1", demo.SkillOutletList, `{"status":"active"}`),
		handlerstest.ActAnswer(t, map[string]any{"status": "complete", "label": "outlet_ids", "data": map[string]any{"outlets": []string{"out-001"}}}),
	)
	x := handlerstest.NewExecutor(env, model, env.Toolcalls)
	itEv := handlerstest.Only(t, handlerstest.HandleStep(t, x, s1Ev), events.TypeStepIterated)
	outs := handlerstest.HandleStep(t, x, itEv)
	sf := handlerstest.Finished(t, outs)
	if sf.Result.Outcome != orch.OutcomeContractViolation || sf.Result.MemoryKey != "" || sf.Result.Validated {
		t.Fatalf("result = %+v, want contract_violation with nothing written", sf.Result)
	}
	handlerstest.AssertNoMemory(t, env, memory.MemoryScope{TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, TaskID: step1.TaskID}.Key("outlet_ids"))
	_, cv := handlerstest.AuditOf(t, outs, "contract_violation")
	exp, _ := json.Marshal(cv["expected_shape"])
	act, _ := json.Marshal(cv["actual_shape"])
	handlerstest.AssertJSON(t, exp, handlerstest.OutletIDsShape)
	handlerstest.AssertJSON(t, act, `{"outlets":"array"}`)

	// The step's group of one is joined by the executor; the router
	// treats the violation as a step failure and replans.
	jEv := handlerstest.Only(t, outs, events.TypeStepJoined)
	routed := handlerstest.HandleTwice(t, func() ([]event.Event, error) { return r.Handle(handlerstest.Ctx(t), jEv) })
	if n := len(handlerstest.OfType(routed, events.TypeStepRequested)) + len(handlerstest.OfType(routed, events.TypeRunFinished)); n != 0 {
		t.Fatalf("a contract violation dispatched or finished: %v", handlerstest.Types(routed))
	}
	rp := handlerstest.Decode[orch.PlanRequest](t, handlerstest.Only(t, routed, events.TypePlanRequested))
	if rp.Failure == nil || rp.Failure.Step != 1 || rp.Failure.Outcome != orch.OutcomeContractViolation {
		t.Fatalf("replan failure = %+v, want step 1's contract_violation", rp.Failure)
	}
	plan := rp.Run.Plan
	if plan.ReplanCount != 1 || plan.Status != orch.PlanReplanning || len(plan.ReplanHistory) != 1 {
		t.Fatalf("plan replan_count %d status %s history %+v", plan.ReplanCount, plan.Status, plan.ReplanHistory)
	}
	if h := plan.ReplanHistory[0]; h.Trigger != orch.OutcomeContractViolation || h.FailedStep != 1 || h.Attempt != 1 {
		t.Errorf("replan record = %+v, want trigger contract_violation for step 1", h)
	}
	if s := handlerstest.StepOf(t, plan, 1); s.Status != orch.StepFailed || !strings.Contains(s.FailureReason, "contract violation") {
		t.Errorf("step 1 = %+v, want failed by the contract violation", s)
	}
	if _, trig := handlerstest.AuditOf(t, routed, "replan.triggered"); trig["trigger"] != orch.OutcomeContractViolation {
		t.Errorf("replan.triggered audit = %v", trig)
	}
	p := handlerstest.AssertProjection(t, env, plan.PlanID, store.PlanStatusReplanning, rp.Run.Seq)
	if len(p.ReplanHistory) != 1 || p.ReplanHistory[0].Trigger != orch.OutcomeContractViolation {
		t.Errorf("projected replan history = %+v", p.ReplanHistory)
	}
}

// Checklist: "Memory keys are always namespaced — no manual key construction
// by SubAgents".
func TestMemory_KeysAlwaysNamespaced(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	data := map[string]any{"outlet_ids": []string{"out-001"}}
	cases := []struct {
		name   string
		answer map[string]any
		label  string // the label the model proposes
		ok     bool
		// foreign is a key the model tried to address; nothing may land there.
		foreign string
	}{
		{name: "plain label", label: "outlet_ids", ok: true},
		{name: "one character", label: "a", ok: true},
		{name: "64 characters", label: strings.Repeat("a", 64), ok: true},
		{name: "model names tenant, session, task and key", label: "outlet_ids", ok: true,
			answer:  map[string]any{"tenant_id": "acme", "session_id": "sess-x", "task_id": "task-x", "key": "acme:sess-x:task-x:outlet_ids"},
			foreign: "acme:sess-x:task-x:outlet_ids"},
		{name: "path traversal", label: "../x", foreign: handlerstest.Tenant + ":" + handlerstest.Session + ":x"},
		{name: "separator", label: "a:b"},
		{name: "slash", label: "a/b"},
		{name: "upper case", label: "A"},
		{name: "empty", label: ""},
		{name: "65 characters", label: strings.Repeat("a", 65)},
		{name: "trailing newline", label: "x\n"},
		{name: "leading underscore", label: "_x"},
		{name: "full key as label", label: handlerstest.Tenant + ":sess-other:task-other:outlet_ids",
			foreign: handlerstest.Tenant + ":sess-other:task-other:outlet_ids"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			answer := map[string]any{"status": "complete", "label": tc.label, "data": data}
			maps.Copy(answer, tc.answer)
			x := handlerstest.NewExecutor(env, handlerstest.Repeating(handlerstest.ActAnswer(t, answer)), env.Toolcalls)
			req := handlerstest.ExecRequest(fmt.Sprintf("run-ns-%d", i), 1)
			req.Run.Plan.Steps[0].TaskID = fmt.Sprintf("task-ns-%d", i)
			req.Run.Plan.Steps[0].ModelOnly = true // the answer comes first; grounding is TestGrounding_*'s
			scope := memory.MemoryScope{TenantID: handlerstest.Tenant, SessionID: handlerstest.Session, TaskID: req.Run.Plan.Steps[0].TaskID}
			// A label off the answer schema is sent back for repair; the
			// model insists, so the step ends invalid_output.
			outs := handlerstest.HandleTurns(t, x, handlerstest.NewEvent(t, fmt.Sprintf("step-ns-%d", i), events.TypeStepRequested, req))
			sf := handlerstest.Finished(t, outs)
			if tc.foreign != "" {
				handlerstest.AssertNoMemory(t, env, tc.foreign)
			}
			if !tc.ok {
				if (sf.Result.Outcome != orch.OutcomeFailed && sf.Result.Outcome != orch.OutcomeInvalidOutput) ||
					sf.Result.MemoryKey != "" || sf.Result.Validated {
					t.Fatalf("result = %+v, want the label %q rejected", sf.Result, tc.label)
				}
				if slices.Contains(handlerstest.AuditNames(outs), "memory.written") {
					t.Error("memory.written audited for a rejected label")
				}
				handlerstest.AssertNoMemory(t, env, scope.Key(tc.label))
				if handlerstest.LockTaken(t, env, scope.Key(tc.label)) {
					t.Error("a rejected label reached the lock")
				}
				// write_memory itself refuses it, whatever the caller.
				key, _, err := (&memory.MemoryWriter{Store: env.Store, Locks: env.Locks}).Write(handlerstest.Ctx(t), scope, tc.label,
					json.RawMessage(handlerstest.OutletIDsData), json.RawMessage(handlerstest.OutletIDsShape))
				if !errors.Is(err, memory.ErrBadLabel) || key != "" {
					t.Errorf("Write(%q) = %q, %v; want ErrBadLabel", tc.label, key, err)
				}
				handlerstest.AssertNoMemory(t, env, scope.Key(tc.label))
				return
			}
			want := handlerstest.Tenant + ":" + handlerstest.Session + ":" + scope.TaskID + ":" + tc.label
			if sf.Result.Outcome != orch.OutcomeComplete || sf.Result.MemoryKey != want {
				t.Fatalf("result = %+v, want complete under %s", sf.Result, want)
			}
			m, err := env.Store.GetMemory(handlerstest.Ctx(t), want)
			if err != nil {
				t.Fatalf("GetMemory: %v", err)
			}
			if m.Key != want || m.TenantID != handlerstest.Tenant || m.SessionID != handlerstest.Session || m.TaskID != scope.TaskID {
				t.Errorf("stored %s for %s/%s/%s, want the run's own namespace", m.Key, m.TenantID, m.SessionID, m.TaskID)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Replanning.

// replanFixture runs a plan to the point where step 1 completed (its output
// stored) and step 2 is dispatched.
type replanFixture struct {
	env   *handlerstest.Env
	r     *handlerstest.Router
	key1  string
	step1 orch.Step
	s2Ev  event.Event
	s2    orch.StepRequest
}

func newReplanFixture(t *testing.T, runID string) *replanFixture {
	t.Helper()
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	prEv, pr := handlerstest.StartRun(t, r, runID)
	s1Ev := handlerstest.Only(t, handlerstest.Propose(t, r, prEv, pr.Run, handlerstest.TwoSteps()), events.TypeStepRequested)
	s1 := handlerstest.Decode[orch.StepRequest](t, s1Ev)
	step1 := handlerstest.StepOf(t, s1.Run.Plan, 1)
	key1 := handlerstest.WriteMemory(t, env, s1.Run, step1, "outlet_ids", handlerstest.Step1Output)
	s2Ev := handlerstest.Only(t, handlerstest.Join(t, r, s1Ev, s1, orch.StepResult{Step: 1, TaskID: step1.TaskID,
		Outcome: orch.OutcomeComplete, MemoryKey: key1, Validated: true}), events.TypeStepRequested)
	step1 = handlerstest.StepOf(t, handlerstest.Decode[orch.StepRequest](t, s2Ev).Run.Plan, 1)
	return &replanFixture{env: env, r: r, key1: key1, step1: step1, s2Ev: s2Ev, s2: handlerstest.Decode[orch.StepRequest](t, s2Ev)}
}

// fail joins a failure of the dispatched step and returns the router's outputs.
func (f *replanFixture) fail(t *testing.T, srEv event.Event, reason string) []event.Event {
	t.Helper()
	sr := handlerstest.Decode[orch.StepRequest](t, srEv)
	s := handlerstest.StepOf(t, sr.Run.Plan, sr.Step)
	return handlerstest.Join(t, f.r, srEv, sr, orch.StepResult{Step: sr.Step, TaskID: s.TaskID, Outcome: orch.OutcomeFailed,
		Reason: reason, Suggestion: "retry the step"})
}

// Checklist: "Step failure triggers replan" (the router side).
func TestReplan_StepFailureTriggersReplan(t *testing.T) {
	wholeRun(t)
	env := handlerstest.NewEnv(t)
	r := handlerstest.NewRouter(t, env)
	prEv, pr := handlerstest.StartRun(t, r, "run-step-fails")
	s1Ev := handlerstest.Only(t, handlerstest.Propose(t, r, prEv, pr.Run, handlerstest.TwoSteps()), events.TypeStepRequested)
	s1 := handlerstest.Decode[orch.StepRequest](t, s1Ev)
	step1 := handlerstest.StepOf(t, s1.Run.Plan, 1)

	fail := orch.StepResult{Step: 1, TaskID: step1.TaskID, Outcome: orch.OutcomeFailed,
		Reason: "skill outlet_list failed: upstream timeout", Suggestion: "retry the step"}
	outs := handlerstest.Join(t, r, s1Ev, s1, fail)
	if n := len(handlerstest.OfType(outs, events.TypeStepRequested)) + len(handlerstest.OfType(outs, events.TypeRunFinished)); n != 0 {
		t.Fatalf("a failed step dispatched or finished: %v", handlerstest.Types(outs))
	}
	rp := handlerstest.Decode[orch.PlanRequest](t, handlerstest.Only(t, outs, events.TypePlanRequested))
	if rp.Failure == nil || !reflect.DeepEqual(*rp.Failure, fail) {
		t.Fatalf("replan failure = %+v, want the failed result %+v", rp.Failure, fail)
	}
	plan := rp.Run.Plan
	if plan.ReplanCount != 1 || plan.Status != orch.PlanReplanning || len(plan.ReplanHistory) != 1 {
		t.Fatalf("plan replan_count %d status %s history %+v", plan.ReplanCount, plan.Status, plan.ReplanHistory)
	}
	if h := plan.ReplanHistory[0]; h.Attempt != 1 || h.FailedStep != 1 || h.Trigger != orch.OutcomeFailed || h.Reason != fail.Reason {
		t.Errorf("replan record = %+v", h)
	}
	if s := handlerstest.StepOf(t, plan, 1); s.Status != orch.StepFailed || s.FailureReason != fail.Reason {
		t.Errorf("failed step = %+v", s)
	}
	if !reflect.DeepEqual(rp.Run.Request, pr.Run.Request) {
		t.Errorf("replan lost the original task: %+v", rp.Run.Request)
	}
	for _, want := range []string{"step_1.failed", "replan.triggered", "subagent_a.spawned"} {
		if !slices.Contains(handlerstest.AuditNames(outs), want) {
			t.Errorf("audit events %v lack %s", handlerstest.AuditNames(outs), want)
		}
	}
	// The replanning status is persisted with the run's seq.
	p := handlerstest.AssertProjection(t, env, plan.PlanID, store.PlanStatusReplanning, rp.Run.Seq)
	if p.ReplanCount != 1 || len(p.ReplanHistory) != 1 || p.ReplanHistory[0].Trigger != orch.OutcomeFailed || p.ReplanHistory[0].FailedStep != 1 {
		t.Errorf("projection replan_count %d history %+v", p.ReplanCount, p.ReplanHistory)
	}
	if len(p.Steps) != 2 || p.Steps[0].Status != store.StepStatusFailed || p.Steps[0].FailureReason != fail.Reason {
		t.Errorf("projected steps = %+v", p.Steps)
	}
}

// Checklist: "Step failure triggers replan — SubAgent-A receives completed
// steps + failure context".
func TestReplan_PlannerReceivesCompletedStepsAndFailure(t *testing.T) {
	wholeRun(t)
	f := newReplanFixture(t, "run-replan-ctx")
	outs := f.fail(t, f.s2Ev, "engagement_analytics timed out")
	rpEv := handlerstest.Only(t, outs, events.TypePlanRequested)

	model := handlerstest.Recording()
	p := planner.NewPlanner(model, f.env.Skills, handlerstest.NopLog)
	planned, err := p.Handle(handlerstest.Ctx(t), rpEv)
	if err != nil {
		t.Fatalf("planner: %v", err)
	}
	if len(model.Requests()) != 1 {
		t.Fatalf("model called %d times, want 1", len(model.Requests()))
	}
	in, ok := model.Requests()[0].Input.(llm.PlanInput)
	if !ok {
		t.Fatalf("model input %T", model.Requests()[0].Input)
	}
	if in.Task != handlerstest.RankTask {
		t.Errorf("task %q, want the original task", in.Task)
	}
	want := []llm.DoneStep{{Step: 1, Task: f.step1.Task, MemoryKey: f.key1}}
	if !slices.Equal(in.Completed, want) {
		t.Errorf("completed steps = %+v, want %+v", in.Completed, want)
	}
	if in.Failed == nil || *in.Failed != (llm.FailedStep{Step: 2, Reason: "engagement_analytics timed out", Suggestion: "retry the step"}) {
		t.Errorf("failed step = %+v", in.Failed)
	}
	if len(in.Remaining) != 1 {
		t.Fatalf("remaining steps = %+v, want the failed step 2", in.Remaining)
	}
	rem := in.Remaining[0]
	if rem.Step != 2 || !slices.Equal(rem.Skills, []string{demo.SkillEngagementAnalytics}) || !slices.Equal(rem.DependsOn, []int{1}) {
		t.Errorf("remaining step = %+v", rem)
	}
	handlerstest.AssertJSON(t, rem.ReturnSpec.Shape, handlerstest.ResultsShape)
	if in.FirstStep != 3 {
		t.Errorf("first_step %d, want 3 (after the existing steps)", in.FirstStep)
	}
	// Only the remaining work is planned, numbered after the existing steps.
	prop := handlerstest.Decode[orch.PlanProposal](t, handlerstest.Only(t, planned, events.TypePlanProposed))
	if got := handlerstest.StepIndexes(prop.Steps); !slices.Equal(got, []int{3}) {
		t.Errorf("revised steps %v, want [3]", got)
	}
}

// Checklist: "Revised plan preserves completed steps and only replans
// remaining work".
func TestReplan_RevisedPlanKeepsCompletedSteps(t *testing.T) {
	wholeRun(t)
	f := newReplanFixture(t, "run-replan-keep")
	rpEv := handlerstest.Only(t, f.fail(t, f.s2Ev, "engagement_analytics timed out"), events.TypePlanRequested)
	planned, err := planner.NewPlanner(offline.New(), f.env.Skills, handlerstest.NopLog).Handle(handlerstest.Ctx(t), rpEv)
	if err != nil {
		t.Fatalf("planner: %v", err)
	}
	ppEv := handlerstest.Only(t, planned, events.TypePlanProposed)
	outs := handlerstest.HandleTwice(t, func() ([]event.Event, error) { return f.r.Handle(handlerstest.Ctx(t), ppEv) })

	// Only the new step is dispatched, with the completed step's output.
	s3Ev := handlerstest.Only(t, outs, events.TypeStepRequested)
	s3 := handlerstest.Decode[orch.StepRequest](t, s3Ev)
	if s3.Step != 3 || !slices.Equal(s3.Inputs, []string{f.key1}) {
		t.Fatalf("dispatched step %d inputs %v, want step 3 with [%s]", s3.Step, s3.Inputs, f.key1)
	}
	plan := s3.Run.Plan
	var statuses []string
	for _, s := range plan.Steps {
		statuses = append(statuses, s.Status)
	}
	if want := []string{orch.StepComplete, orch.StepRevised, orch.StepRunning}; !slices.Equal(statuses, want) {
		t.Errorf("statuses after the revision = %v, want %v", statuses, want)
	}
	if s := plan.Steps[0]; s.Index != 1 || s.MemoryKey != f.key1 || s.TaskID != f.step1.TaskID || !s.Validated {
		t.Errorf("completed step after the revision = %+v, want step 1 unchanged with %s", s, f.key1)
	}
	if s := plan.Steps[1]; s.Index != 2 || s.FailureReason == "" {
		t.Errorf("failed step after the revision = %+v", s)
	}
	if plan.ReplanCount != 1 || plan.Status != orch.PlanExecuting || !slices.Contains(handlerstest.AuditNames(outs), "plan.revised") {
		t.Errorf("plan replan_count %d status %s audits %v", plan.ReplanCount, plan.Status, handlerstest.AuditNames(outs))
	}
	proj := handlerstest.AssertProjection(t, f.env, plan.PlanID, store.PlanStatusExecuting, s3.Run.Seq)
	if proj.Steps[0].Status != store.StepStatusComplete || proj.Steps[0].MemoryKey != f.key1 || proj.Steps[1].Status != store.StepStatusRevised {
		t.Errorf("projected steps = %+v", proj.Steps)
	}

	// The run continues from the new step and completes; the completed
	// step is never dispatched again and its skill never runs again.
	fl := newFlow(t, f.env, f.env.Store)
	fl.router = f.r.Router
	res, seen := fl.drive(t, s3Ev)
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run finished %s (%s), want SUCCESS", res.TerminalCode, res.Reason)
	}
	for _, ev := range handlerstest.OfType(seen, events.TypeStepRequested) {
		if n := handlerstest.Decode[orch.StepRequest](t, ev).Step; n != 3 {
			t.Errorf("step %d dispatched after the revision; only step 3 may be", n)
		}
	}
	if n := f.env.Demo.Calls(demo.SkillOutletList); n != 0 {
		t.Errorf("outlet_list ran %d times: completed work was redone", n)
	}
	if len(res.Steps) != 3 || res.Steps[0].Status != orch.StepComplete || res.Steps[0].MemoryKey != f.key1 ||
		res.Steps[1].Status != orch.StepRevised || res.Steps[2].Status != orch.StepComplete {
		t.Errorf("final steps = %+v", res.Steps)
	}
	for _, id := range []string{"out-001", "out-002"} {
		if !strings.Contains(res.Response, id) {
			t.Errorf("response %q lacks %s from the completed step's output", res.Response, id)
		}
	}
}

// Checklist: "After 3 replan attempts, Orchestrator returns structured
// failure — does not loop forever".
func TestReplan_FourthFailureEndsInStructuredFailure(t *testing.T) {
	wholeRun(t)
	f := newReplanFixture(t, "run-max")
	planner := planner.NewPlanner(offline.New(), f.env.Skills, handlerstest.NopLog)
	srEv := f.s2Ev
	replans := 0
	var last []event.Event
	for attempt := 1; attempt <= orch.MaxReplans+1; attempt++ {
		reason := fmt.Sprintf("skill timed out (attempt %d)", attempt)
		outs := f.fail(t, srEv, reason)
		if attempt > orch.MaxReplans {
			last = outs
			break
		}
		rpEv := handlerstest.Only(t, outs, events.TypePlanRequested)
		replans++
		if rp := handlerstest.Decode[orch.PlanRequest](t, rpEv); rp.Run.Plan.ReplanCount != attempt {
			t.Fatalf("replan %d has replan_count %d", attempt, rp.Run.Plan.ReplanCount)
		}
		planned, err := planner.Handle(handlerstest.Ctx(t), rpEv)
		if err != nil {
			t.Fatalf("planner: %v", err)
		}
		ppEv := handlerstest.Only(t, planned, events.TypePlanProposed)
		srEv = handlerstest.Only(t, handlerstest.HandleTwice(t, func() ([]event.Event, error) { return f.r.Handle(handlerstest.Ctx(t), ppEv) }), events.TypeStepRequested)
		if got, want := handlerstest.Decode[orch.StepRequest](t, srEv).Step, 2+attempt; got != want {
			t.Fatalf("replan %d dispatched step %d, want %d", attempt, got, want)
		}
	}
	if replans != orch.MaxReplans {
		t.Fatalf("%d replans, want %d", replans, orch.MaxReplans)
	}

	// The fourth failure ends the run: no further plan.requested.
	if n := len(handlerstest.OfType(last, events.TypePlanRequested)) + len(handlerstest.OfType(last, events.TypeStepRequested)); n != 0 {
		t.Fatalf("got %v past the replan limit", handlerstest.Types(last))
	}
	res := handlerstest.Decode[orch.RunResult](t, handlerstest.Only(t, last, events.TypeRunFinished))
	if res.TerminalCode != orch.CodeRepeatedFailure || res.Status != orch.PlanFailed {
		t.Fatalf("run finished %s/%s, want REPEATED_FAILURE/failed", res.TerminalCode, res.Status)
	}
	if !strings.Contains(res.Reason, "max replan attempts reached") {
		t.Errorf("reason = %q", res.Reason)
	}
	var detail struct {
		Status         string           `json:"status"`
		Reason         string           `json:"reason"`
		CompletedSteps []map[string]any `json:"completed_steps"`
		LastFailure    map[string]any   `json:"last_failure"`
	}
	if err := json.Unmarshal(res.Detail, &detail); err != nil {
		t.Fatalf("detail %s: %v", res.Detail, err)
	}
	if detail.Status != "failed" || detail.Reason != "max replan attempts reached" {
		t.Errorf("detail = %s", res.Detail)
	}
	if len(detail.CompletedSteps) != 1 || detail.CompletedSteps[0]["step"] != 1.0 || detail.CompletedSteps[0]["memory_key"] != f.key1 {
		t.Errorf("completed_steps = %v, want step 1 with %s", detail.CompletedSteps, f.key1)
	}
	lastStep := float64(2 + orch.MaxReplans)
	if detail.LastFailure["step"] != lastStep || detail.LastFailure["reason"] != fmt.Sprintf("skill timed out (attempt %d)", orch.MaxReplans+1) {
		t.Errorf("last_failure = %v, want step %v", detail.LastFailure, lastStep)
	}
	sr := handlerstest.Decode[orch.StepRequest](t, srEv)
	p := handlerstest.AssertProjection(t, f.env, sr.Run.Plan.PlanID, store.PlanStatusFailed, sr.Run.Seq+2)
	if p.ReplanCount != orch.MaxReplans || len(p.ReplanHistory) != orch.MaxReplans {
		t.Errorf("projection replan_count %d history %d, want %d", p.ReplanCount, len(p.ReplanHistory), orch.MaxReplans)
	}
	var attempts []int
	for _, h := range p.ReplanHistory {
		attempts = append(attempts, h.Attempt)
	}
	sort.Ints(attempts)
	if !slices.Equal(attempts, []int{1, 2, 3}) {
		t.Errorf("replan attempts %v", attempts)
	}
}
