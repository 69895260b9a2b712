package runctl

import (
	"slices"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/store"
)

// Summary is a summary of a session's older turns that a model wrote
// (seed 002: with a real model the summary is written by the model): the
// router asks for it when a run's end folds turns out of its agent's
// history window (Folding), and the session keeps it in place of the
// extractive summary when the write folds exactly the turns it Covers
// (their message ids, oldest first).
type Summary struct {
	Text   string
	Covers []string
}

// covers reports whether s is the summary of exactly the messages folded.
func (s *Summary) covers(folded []store.SessionMessage) bool {
	return s != nil && s.Text != "" && slices.EqualFunc(s.Covers, folded, func(id string, m store.SessionMessage) bool {
		return id == m.MsgID
	})
}

// Folding is what appending the exchange of req to sess would fold out of
// the agent's history window w: the model's input (the summary so far,
// then the turns leaving the window, within the summary's bytes) and the
// ids of those turns. It is empty when nothing would be folded, or when
// the exchange is already in the session (a redelivered end).
func Folding(sess store.Session, req orch.RunRequest, answer string, w orch.HistoryWindow) (llm.SummarizeInput, []string) {
	sess.Messages = slices.Clone(sess.Messages)
	if !addExchange(&sess, req, answer, sess.LastActive) {
		return llm.SummarizeInput{}, nil
	}
	c, ok := windowCut(sess.Messages, w.Resolved())
	if !ok {
		return llm.SummarizeInput{}, nil
	}
	folded := c.rest[:c.cut]
	ids := make([]string, len(folded))
	for i, m := range folded {
		ids[i] = m.MsgID
	}
	return summaryInput(c.summary, folded, c.summaryCap), ids
}

// windowFold is how a session's messages are condensed to a history window: the
// first message, the summary, the others (rest), of which the first cut
// are folded into a summary of at most summaryCap bytes.
type windowFold struct {
	first, summary store.SessionMessage
	rest           []store.SessionMessage
	cut            int
	summaryCap     int
}

// windowCut is how msgs are condensed to the window w (see
// CondenseWindow); false when nothing is folded.
func windowCut(msgs []store.SessionMessage, w orch.HistoryWindow) (windowFold, bool) {
	summary, kept := splitSummary(msgs)
	if len(kept) < 2 {
		return windowFold{}, false
	}
	c := windowFold{first: kept[0], summary: summary, rest: kept[1:]}
	keep := max(min(w.MaxMessages-2, 2*w.SummarizeAfter), 2) // the first and the summary count too
	budget := w.MaxTokens * 4
	c.summaryCap = min(HistorySummaryBytes, budget/4)
	c.cut = max(0, len(c.rest)-keep)
	for c.cut < len(c.rest)-2 && len(c.first.Content)+len(summary.Content)+size(c.rest[c.cut:]) > budget {
		c.cut++
	}
	return c, c.cut > 0
}

// summaryInput is the summary task's input for folding old into
// summary: the summary so far, then old, within limit bytes.
func summaryInput(summary store.SessionMessage, old []store.SessionMessage, limit int) llm.SummarizeInput {
	in := llm.SummarizeInput{MaxBytes: limit}
	if summary.Content != "" {
		in.History = append(in.History, llm.HistoryMessage{Role: RoleSummary, Content: summary.Content})
	}
	for _, m := range old {
		in.History = append(in.History, llm.HistoryMessage{Role: m.Role, Content: m.Content})
	}
	return in
}
