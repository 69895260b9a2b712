package bench

import (
	"context"
	"fmt"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/bench/pipeline"
	"github.com/agentbus/agentbus/handlers/router"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/offline"
)

// SupervisorFanOut compares a supervisor run of Lanes lanes, each of
// whose skill call takes SkillLatencyMS, with Lanes times the wall time of
// a one-lane run: how much of the lanes' work the fan-out overlaps.
type SupervisorFanOut struct {
	Lanes          int     `json:"lanes"`
	SkillLatencyMS int     `json:"skill_latency_ms"`
	Runs           int     `json:"runs"`
	OneLaneMS      Dist    `json:"one_lane_ms"`
	LanesMS        Dist    `json:"lanes_ms"`
	Speedup        float64 `json:"speedup_vs_sequential"` // Lanes × one lane p50 / lanes p50
}

// supervisorModel routes every task to the supervisor pattern and
// decomposes it into lanes lanes, each calling stage1; the offline model
// does the rest (each lane's loop, the synthesis).
type supervisorModel struct {
	inner llm.Model
	lanes int
}

func (m *supervisorModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	var v any
	switch in := req.Input.(type) {
	case llm.RouteInput:
		v = llm.RouteOutput{TaskType: "general", Pattern: router.PatternSupervisor, Reason: "bench"}
	case llm.SuperviseInput:
		out := llm.SuperviseOutput{}
		for i := range m.lanes {
			out.Lanes = append(out.Lanes, llm.LaneGoal{Goal: fmt.Sprintf("Bench lane %d: %s", i+1, in.Task), Skills: []string{"stage1"}})
		}
		v = out
	default:
		return m.inner.Complete(ctx, req)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: string(b)}, Model: "bench"}, nil
}

// supervisorFanOut measures runs supervisor runs of lanes lanes and of
// one lane, with stage1 sleeping latency per call, on two executors.
func supervisorFanOut(ctx context.Context, srv *benchServer, lanes int, latency time.Duration, runs int) (SupervisorFanOut, error) {
	res := SupervisorFanOut{Lanes: lanes, SkillLatencyMS: int(latency.Milliseconds()), Runs: runs}
	measure := func(n int) (Dist, error) {
		d, err := deploy(ctx, srv, deployConfig{tcp: true, executors: 2, skillLatency: latency,
			model: &supervisorModel{inner: offline.New(), lanes: n}})
		if err != nil {
			return Dist{}, err
		}
		defer d.close()
		var walls []time.Duration
		for range runs {
			_, took, err := d.run(ctx, pipeline.Task)
			if err != nil {
				return Dist{}, err
			}
			walls = append(walls, took)
		}
		return distOf(walls), nil
	}
	var err error
	if res.OneLaneMS, err = measure(1); err != nil {
		return res, err
	}
	if res.LanesMS, err = measure(lanes); err != nil {
		return res, err
	}
	res.Speedup = ratio(float64(lanes)*res.OneLaneMS.P50, res.LanesMS.P50)
	return res, nil
}
