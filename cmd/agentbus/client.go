package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/llm"
)

// submit posts a streamed run and calls onChunk for every chunk. It
// returns the final answer chunk's content decoded.
func submit(url string, body handlers.RunBody, onChunk func(handlers.Chunk)) (handlers.RunResponse, error) {
	var res handlers.RunResponse
	body.Stream = true
	b, _ := json.Marshal(body)
	resp, err := http.Post(strings.TrimRight(url, "/")+"/agent/run", "application/json", bytes.NewReader(b))
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return res, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var c handlers.Chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return res, fmt.Errorf("bad chunk: %w", err)
		}
		if !c.EndOfDialog {
			onChunk(c)
			continue
		}
		if c.MessageType == "error" && !strings.HasPrefix(c.Content, "{") {
			return res, fmt.Errorf("%s", c.Content)
		}
		err := json.Unmarshal([]byte(c.Content), &res)
		return res, err
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	return res, fmt.Errorf("stream ended without an answer")
}

// printer prints a streamed run: progress lines as they come and the
// answer as the model writes it.
type printer struct {
	progress func(handlers.Chunk)
	answered bool // an answer chunk was printed
}

func (p *printer) chunk(c handlers.Chunk) {
	if c.MessageType != "answer" {
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

// usageLine summarises a run's model usage.
func usageLine(u llm.Usage) string {
	return fmt.Sprintf("%d model calls, %d tokens in (%d cached), %d out, $%.6f", u.Calls, u.InputTokens,
		u.CachedInputTokens, u.OutputTokens, u.CostUSD)
}
