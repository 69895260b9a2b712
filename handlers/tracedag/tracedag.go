package tracedag

import (
	"regexp"
	"strconv"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/store"
)

// TraceDAG is a run's trace as a provenance graph (seed 001): the routing
// decision, the planner's proposal, each fan-out group with its members
// (steps or supervisor lanes), the join, and the synthesis derived from the
// steps it used. GET /agent/plans/{plan_id}/trace?view=dag returns it.
type TraceDAG struct {
	Nodes []DAGNode `json:"nodes"`
	Edges []DAGEdge `json:"edges"`
}

// DAGNode is one node: Kind is routing, plan, group, step, synthesis or
// answer; Data holds what the trace recorded of it.
type DAGNode struct {
	ID   string         `json:"id"`
	Kind string         `json:"kind"`
	Data map[string]any `json:"data,omitempty"`
}

// DAGEdge says To derives from From.
type DAGEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

var stepEvent = regexp.MustCompile(`^step_(\d+)\.(started|complete|failed)$`)

// Build folds a run's ordered trace into its provenance graph.
func Build(evs []store.Event) TraceDAG {
	b := dagBuilder{index: map[string]int{}, byTask: map[string]string{}}
	for _, ev := range evs {
		var p map[string]any
		_ = json.Unmarshal(ev.Payload, &p)
		b.event(ev, p)
	}
	return b.dag
}

type dagBuilder struct {
	dag    TraceDAG
	index  map[string]int    // node id → position
	byTask map[string]string // task id → step node
	last   string            // the node the next group derives from
}

func (b *dagBuilder) node(id, kind string, data map[string]any, parents ...string) *DAGNode {
	if i, ok := b.index[id]; ok {
		for k, v := range data {
			b.dag.Nodes[i].Data[k] = v
		}
		return &b.dag.Nodes[i]
	}
	if data == nil {
		data = map[string]any{}
	}
	b.index[id] = len(b.dag.Nodes)
	b.dag.Nodes = append(b.dag.Nodes, DAGNode{ID: id, Kind: kind, Data: data})
	for _, p := range parents {
		if p != "" {
			b.dag.Edges = append(b.dag.Edges, DAGEdge{From: p, To: id})
		}
	}
	return &b.dag.Nodes[b.index[id]]
}

func (b *dagBuilder) event(ev store.Event, p map[string]any) {
	switch name := ev.EventType; name {
	case "routing.decided":
		b.node("routing", "routing", p)
		b.last = "routing"
	case "plan.received", "plan.revised", "react.started", "supervisor.decomposed", "supervisor.reiterated":
		id := "plan/" + strconv.Itoa(len(b.dag.Nodes))
		p["event"] = name
		b.node(id, "plan", p, b.last)
		b.last = id
	case "fanout.started":
		if g, ok := p["correlation_id"].(string); ok {
			b.node("group/"+g, "group", p, b.last)
		}
	case "fanin.joined", "fanin.deadline":
		if g, ok := p["correlation_id"].(string); ok {
			b.node("group/"+g, "group", map[string]any{"joined": name, "join": p})
			b.last = "group/" + g
		}
	case "supervisor.reviewed":
		// The review judged the findings so far: what follows (a fan-out
		// again, or the answer) derives from it.
		id := "review/" + strconv.Itoa(len(b.dag.Nodes))
		b.node(id, "review", p, b.last)
		b.last = id
	case "synthesis.started":
		parents := []string{b.last}
		from, _ := p["derived_from"].([]any)
		for _, f := range from {
			if m, ok := f.(map[string]any); ok {
				if s, ok := b.byTask[str(m["task_id"])]; ok {
					parents = append(parents, s)
				}
			}
		}
		b.node("synthesis", "synthesis", p, parents...)
		b.last = "synthesis"
	case "run.finished":
		b.node("answer", "answer", p, b.last)
	default:
		b.step(ev, name, p)
	}
}

// step records a step's start (under its group) and its outcome.
func (b *dagBuilder) step(ev store.Event, name string, p map[string]any) {
	m := stepEvent.FindStringSubmatch(name)
	if m == nil || ev.TaskID == "" {
		return
	}
	id := "step/" + ev.TaskID
	if m[2] != "started" {
		b.node(id, "step", map[string]any{"status": m[2], "outcome": p})
		return
	}
	group := ""
	if g, ok := p["group"].(string); ok {
		group = "group/" + g
		b.node(group, "group", nil, b.last)
	}
	b.byTask[ev.TaskID] = id
	b.node(id, "step", map[string]any{"step": m[1], "task_id": ev.TaskID, "skills": p["skills"]}, group)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
