package main

import (
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/runclient"
)

// printer prints a streamed run: progress lines as they come and the
// answer as the model writes it.
type printer struct {
	progress func(runclient.Chunk)
	answered bool // an answer chunk was printed
}

func (p *printer) chunk(c runclient.Chunk) {
	if c.MessageType == runclient.ChunkProgress || c.MessageType == runclient.ChunkAwaitingGate {
		return // the trace's progress chunks say the same; a gate is reported with the result
	}
	switch c.MessageType {
	case runclient.ChunkThought:
		fmt.Printf("  thought: %s\n", oneLine(c.Content, 200))
		return
	case runclient.ChunkObservation:
		var o runclient.Observation
		if json.Unmarshal([]byte(c.Content), &o) == nil {
			what := "observed"
			if o.IsError {
				what = "failed"
			}
			fmt.Printf("  step_%d %s %s: %s\n", o.StepIndex, o.SkillID, what, oneLine(o.Result, 120))
		}
		return
	case "answer":
	default:
		p.progress(c)
		return
	}
	if !p.answered {
		fmt.Print("\nanswer:\n")
		p.answered = true
	}
	fmt.Print(c.Content)
	if c.EndOfMessage {
		fmt.Println()
	}
}

// oneLine is s on one line, cut to at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// usageLine summarises a run's model usage.
func usageLine(u llm.Usage) string {
	return fmt.Sprintf("%d model calls, %d tokens in (%d cached), %d out, $%.6f", u.Calls, u.InputTokens,
		u.CachedInputTokens, u.OutputTokens, u.CostUSD)
}
