package skills

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
)

// Progress is a tool's report of how far its call has come
// (notifications/progress). Total is 0 when the tool does not know it.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

type progressKey struct{}

// WithProgress returns ctx whose tool calls ask the server for progress
// notifications (a progressToken in the request's _meta) and pass each to
// report. Progress only increases (MCP requires it of a server): a report
// that arrives after a later one, on another of the session's streams, is
// dropped. report must not block for long: it runs on the connection's
// reader.
func WithProgress(ctx context.Context, report func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, report)
}

func progressFrom(ctx context.Context) func(Progress) {
	f, _ := ctx.Value(progressKey{}).(func(Progress))
	return f
}

// progressTokens numbers the progress tokens of this process's calls.
var progressTokens atomic.Uint64

// watchProgress gives a call with a progress report a token, registered
// on cn until the returned func is called.
func (cn *conn) watchProgress(report func(Progress)) (mcp.ProgressToken, func()) {
	if report == nil {
		return nil, func() {}
	}
	token := fmt.Sprintf("agentbus-%d", progressTokens.Add(1))
	var mu sync.Mutex
	last := math.Inf(-1)
	cn.mu.Lock()
	if cn.progress == nil {
		cn.progress = map[string]func(Progress){}
	}
	cn.progress[token] = func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Progress <= last {
			return
		}
		last = p.Progress
		report(p)
	}
	cn.mu.Unlock()
	return token, func() {
		cn.mu.Lock()
		delete(cn.progress, token)
		cn.mu.Unlock()
	}
}

// onNotification passes a progress notification to the report of the
// call whose token it names; others (and a token no call in flight holds)
// are ignored.
func (cn *conn) onNotification(n mcp.JSONRPCNotification) {
	if n.Method != string(mcp.MethodNotificationProgress) {
		return
	}
	f := n.Params.AdditionalFields
	token, _ := f["progressToken"].(string)
	cn.mu.Lock()
	report := cn.progress[token]
	cn.mu.Unlock()
	if report == nil {
		return
	}
	p := Progress{}
	p.Progress, _ = f["progress"].(float64)
	p.Total, _ = f["total"].(float64)
	p.Message, _ = f["message"].(string)
	report(p)
}
