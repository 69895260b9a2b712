package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// analyse fills sum from the stream, the Skill Service and the records.
func (h *harness) analyse(ctx context.Context, recs []*runRec, sum *Summary) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = h.w.catchUp(cctx)
	var problems []string
	note := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range recs {
		if r.viaHTTP {
			sum.HTTPRuns++
		}
		ids := h.idsOf(r)
		if r.viaHTTP && len(ids) > 1 {
			sum.Resubmitted += len(ids) - 1
		}
		lost, mismatched := len(ids) == 0, false
		if len(ids) == 0 {
			note("run %d (session %s) was never requested: %v", r.idx, r.session, r.err)
		}
		for _, id := range ids {
			res := h.w.results(id)
			if len(res) == 0 {
				lost = true
				note("run %d (session %s, run %s) has no run.finished", r.idx, r.session, id)
			}
			if len(res) > 1 {
				sum.MultiFinished++
				note("run %s has %d run.finished", id, len(res))
			}
			for _, f := range res {
				if f.TerminalCode != orch.CodeSuccess || f.Response != h.reference {
					mismatched = true
					note("run %d (run %s) ended %s: %.300s", r.idx, id, f.TerminalCode, f.Response)
				}
			}
		}
		if !r.stalled.IsZero() {
			for _, id := range ids {
				for _, f := range h.w.results(id) {
					note("run %d: POST /agent/run got no answer within %s although run %s finished (%s)",
						r.idx, h.cfg.HTTPTimeout, id, f.TerminalCode)
				}
			}
		}
		if r.httpRes != nil && (r.httpRes.TerminalCode != orch.CodeSuccess || r.httpRes.Response != h.reference) {
			mismatched = true
			note("run %d: POST /agent/run answered %s: %.300s", r.idx, r.httpRes.TerminalCode, r.httpRes.Response)
		}
		if lost {
			sum.Lost++
		}
		if mismatched && !lost {
			sum.Mismatched++
		}
	}
	if rep, err := h.invocations(cctx); err != nil {
		note("GET /invocations: %v", err)
		sum.DuplicateEffects = -1
	} else {
		keys := make([]string, 0, len(rep.Executions))
		for k := range rep.Executions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n := rep.Executions[k]
			sum.Executions += n
			if k != "" && n > 1 {
				sum.DuplicateEffects++
				note("idempotency key %s executed %d times", k, n)
			}
		}
		for _, n := range rep.Replays {
			sum.Replays += n
		}
	}
	if n, err := countSubject(cctx, h.js, "agent.dead.>"); err == nil {
		sum.DeadLetters = n
	}
	h.mu.Lock()
	sum.Faults = h.faults
	sum.Crashes = h.crashes
	sum.HTTPRetries, sum.HTTPStalls = h.retries, h.stalls
	sum.Problems = append(append([]string(nil), h.problems...), problems...)
	h.mu.Unlock()
}

// invocations reads the Skill Service's executions and replays.
func (h *harness) invocations(ctx context.Context) (demo.InvocationReport, error) {
	var rep demo.InvocationReport
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.d.skills+"/invocations", nil)
	if err != nil {
		return rep, err
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("status %s", resp.Status)
	}
	return rep, json.NewDecoder(resp.Body).Decode(&rep)
}

// printTails prints the end of every process log, and the lines that
// mention the first failed runs.
func (h *harness) printTails(recs []*runRec) {
	out := h.cfg.Out
	var failed []string
	for _, r := range recs {
		for _, id := range h.idsOf(r) {
			res := h.w.results(id)
			if len(res) == 0 || res[0].TerminalCode != orch.CodeSuccess || res[0].Response != h.reference {
				failed = append(failed, id)
			}
		}
	}
	for _, name := range h.d.order {
		m := h.d.members[name]
		fmt.Fprintf(out, "----- %s (%s), last lines -----\n%s\n", name, m.logPath, tail(m.logPath, 25))
		for _, id := range failed[:min(3, len(failed))] {
			if lines := grep(m.logPath, id, 15); len(lines) > 0 {
				fmt.Fprintf(out, "----- %s, lines about run %s -----\n%s\n", name, id, strings.Join(lines, "\n"))
			}
		}
	}
}

// checkProjections reads, through the ingress API, the plan projection and
// the audit trace of every finished run once the projector has caught up:
// the plan must be complete and the trace must hold the same audit events
// (by type, with multiplicity) as the reference run's.
func (h *harness) checkProjections(ctx context.Context, recs []*runRec, sum *Summary) {
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	if err := h.waitConsumerIdle(wctx, events.StreamAgent, handlers.RoleProjector); err != nil {
		sum.Problems = append(sum.Problems, "the projector did not catch up: "+err.Error())
	}
	// The reads have a budget of their own: a thousand plan and trace
	// reads through the ingress take longer than the projector's wait, and
	// a trace read scans the tenant's stored events, so each read costs
	// more the longer the run.
	var finished []*runRec
	for _, r := range recs {
		for _, id := range h.idsOf(r) {
			if res := h.w.results(id); len(res) > 0 && res[0].TerminalCode == orch.CodeSuccess {
				finished = append(finished, r)
				break
			}
		}
	}
	checks := h.cfg.ProjectionChecks
	if checks <= 0 || checks > len(finished) {
		checks = len(finished)
	}
	cctx, cancel := context.WithTimeout(ctx, max(5*time.Minute, time.Duration(checks)*5*time.Second))
	defer cancel()
	want, err := h.traceTypes(cctx, h.refPlan)
	if err != nil {
		sum.Problems = append(sum.Problems, "reference trace: "+err.Error())
		return
	}
	type job struct{ run, plan string }
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				stale, gap := h.checkProjection(cctx, j.plan, want)
				mu.Lock()
				if stale != "" {
					sum.StaleProjections++
					if len(sum.Problems) < 40 {
						sum.Problems = append(sum.Problems, fmt.Sprintf("run %s: plan %s: %s", j.run, j.plan, stale))
					}
				}
				if gap != "" {
					sum.TraceGaps++
					if len(sum.Problems) < 40 {
						sum.Problems = append(sum.Problems, fmt.Sprintf("run %s: trace of plan %s: %s", j.run, j.plan, gap))
					}
				}
				mu.Unlock()
			}
		}()
	}
	// A sample is spread evenly over the run: every step-th finished run.
	step := float64(len(finished)) / float64(max(checks, 1))
	for i := range checks {
		r := finished[int(float64(i)*step)]
		for _, id := range h.idsOf(r) {
			res := h.w.results(id)
			if len(res) == 0 || res[0].TerminalCode != orch.CodeSuccess {
				continue
			}
			sum.ProjectionsChecked++
			jobs <- job{id, res[0].PlanID}
		}
	}
	close(jobs)
	wg.Wait()
}

// checkProjection describes what is wrong with one run's plan projection
// and trace ("" when nothing is).
func (h *harness) checkProjection(ctx context.Context, planID string, want map[string]int) (stale, gap string) {
	var p struct {
		Plan store.Plan `json:"plan"`
	}
	if err := h.getJSON(ctx, "/agent/plans/"+planID, &p); err != nil {
		stale = err.Error()
	} else if p.Plan.Status != orch.PlanComplete {
		stale = "status " + p.Plan.Status
	} else {
		for _, st := range p.Plan.Steps {
			if st.Status != orch.StepComplete {
				stale = fmt.Sprintf("step %d is %s", st.StepIndex, st.Status)
			}
		}
	}
	got, err := h.traceTypes(ctx, planID)
	if err != nil {
		return stale, err.Error()
	}
	var diffs []string
	for typ, n := range want {
		if got[typ] != n {
			diffs = append(diffs, fmt.Sprintf("%s %d (want %d)", typ, got[typ], n))
		}
	}
	for typ, n := range got {
		if _, ok := want[typ]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s %d (want 0)", typ, n))
		}
	}
	sort.Strings(diffs)
	return stale, strings.Join(diffs, ", ")
}

// traceTypes counts the audit events of a plan's trace by type.
func (h *harness) traceTypes(ctx context.Context, planID string) (map[string]int, error) {
	var tr struct {
		Events []store.Event `json:"events"`
	}
	if err := h.getJSON(ctx, "/agent/plans/"+planID+"/trace", &tr); err != nil {
		return nil, err
	}
	types := map[string]int{}
	for _, ev := range tr.Events {
		// A run resubmitted in a session whose first attempt finished
		// sees that exchange as history: its trace records the context.
		if ev.EventType != "context.loaded" {
			types[ev.EventType]++
		}
	}
	return types, nil
}

// getJSON GETs path from the ingress, retrying through faults until ctx ends.
func (h *harness) getJSON(ctx context.Context, path string, v any) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.d.ingress+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Tenant-Id", Tenant) // every read is tenant-scoped
		resp, err := h.http.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case rerr != nil:
				err = rerr
			case resp.StatusCode == http.StatusOK:
				return json.Unmarshal(b, v)
			case resp.StatusCode == http.StatusNotFound:
				return fmt.Errorf("GET %s: not found", path)
			default:
				err = fmt.Errorf("GET %s: %s", path, resp.Status)
			}
		}
		if sleep(ctx, 250*time.Millisecond) != nil {
			return err
		}
	}
}

// waitConsumerIdle waits until a role's consumer has nothing pending or unacked.
func (h *harness) waitConsumerIdle(ctx context.Context, stream, durable string) error {
	for {
		cons, err := h.js.Consumer(ctx, stream, durable)
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = cons.Info(ctx); err == nil {
				if info.NumPending == 0 && info.NumAckPending == 0 {
					return nil
				}
				err = fmt.Errorf("%d pending, %d unacked", info.NumPending, info.NumAckPending)
			}
		}
		if sleep(ctx, 250*time.Millisecond) != nil {
			return err
		}
	}
}

// lockedWriter serialises the writes of the harness's goroutines.
