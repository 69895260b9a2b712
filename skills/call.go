package skills

import (
	"context"
	"errors"
)

// ErrTimeout reports a tool call that did not answer within its own
// bound (a webhook tool's timeout_ms): the executor fails the step, as
// when its own skill timeout passes.
var ErrTimeout = errors.New("skills: tool call timed out")

// CallInfo is what a call knows of the run that makes it, for tools that
// act on the run's session (set_context, send_message) or tell their
// endpoint who calls (webhooks).
type CallInfo struct {
	RunID     string
	SessionID string
	UserID    string
	// CallID is the model's id of the tool call.
	CallID string
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying info for the calls made with it.
func WithCallInfo(ctx context.Context, info CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

// CallInfoFrom returns the CallInfo of ctx, zero when it carries none.
func CallInfoFrom(ctx context.Context) CallInfo {
	info, _ := ctx.Value(callInfoKey{}).(CallInfo)
	return info
}
