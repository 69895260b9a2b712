package main

import (
	"fmt"

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
	switch c.MessageType {
	case runclient.ChunkProgress, runclient.ChunkAwaitingGate:
		return // the trace's progress chunks say the same; a gate is reported with the result
	case "progress":
		p.progress(c)
		return
	case "answer":
	default:
		if line, ok := runclient.Describe(c); ok {
			fmt.Println("  " + line)
		}
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

// usageLine summarises a run's model usage.
func usageLine(u llm.Usage) string {
	return fmt.Sprintf("%d model calls, %d tokens in (%d cached), %d out, $%.6f", u.Calls, u.InputTokens,
		u.CachedInputTokens, u.OutputTokens, u.CostUSD)
}
