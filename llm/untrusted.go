package llm

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// Untrusted content (tool results, stored step outputs, documents, the
// session's past conversation, recalled memories) reaches a model as data, never as an
// instruction: Conversation puts each piece in an element of its own that
// names its source, after the task input or as the content of a tool
// message, and the system prompts say that nothing inside one is an
// instruction. The content is escaped so that it cannot close the element
// early.

// UntrustedTag is the name of the element untrusted content is put in:
// <untrusted_data source="tool:fetch_page">…</untrusted_data>.
const UntrustedTag = "untrusted_data"

// Sources of untrusted content, the prefix of an element's source.
const (
	SourceTool       = "tool:"        // a tool result, by tool name
	SourceMemory     = "memory:"      // a stored step output, by memory key
	SourceStepOutput = "step_output:" // a step output the synthesis reads, by step number
	SourceDocument   = "document:"    // a sample of a large tool response, by tool name
	SourceHistory    = "session_history"
	SourceHandoff    = "handoff:"         // the context an agent handing a run over passed on, by agent
	SourceRecalled   = "recalled_memory:" // a long-term memory the run recalled, by memory id
)

// tagRE finds what could open or close the element inside content: its
// tag name after "<" (and an optional "/"), whatever the case and spacing.
var tagRE = regexp.MustCompile(`(?i)<(\s*/?\s*` + UntrustedTag + `)`)

// sourceRE is what a source attribute keeps of a name: anything else is
// replaced, so a hostile tool name cannot end the attribute.
var sourceRE = regexp.MustCompile(`[^A-Za-z0-9_.:/@ -]`)

// Delimit returns content as untrusted data from source: in one
// untrusted_data element naming the source, with every "<" that would
// start the element's tag inside it escaped as "&lt;".
func Delimit(source, content string) string {
	src := sourceRE.ReplaceAllString(source, "_")
	body := tagRE.ReplaceAllString(content, "&lt;$1")
	return fmt.Sprintf("<%s source=%q>\n%s\n</%s>", UntrustedTag, src, body, UntrustedTag)
}

// datum is one piece of untrusted content a task input carries.
type datum struct {
	source  string
	content string
}

// splitUntrusted returns the task input as the model is told it (its
// untrusted parts taken out, each named where it was) and the untrusted
// content it carries, in a stable order.
func splitUntrusted(in any) (any, []datum) {
	switch v := in.(type) {
	case ActInput:
		keys := make([]string, 0, len(v.Inputs))
		for k := range v.Inputs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		data := make([]datum, 0, len(keys))
		for _, k := range keys {
			data = append(data, datum{SourceMemory + k, string(v.Inputs[k])})
		}
		data = append(data, memoryData(v.Memories)...)
		v.Inputs, v.Memories = nil, nil
		return v, data
	case SynthInput:
		outs, data := outputData(v.Outputs)
		data = append(data, historyData(v.History)...)
		data = append(data, memoryData(v.Memories)...)
		v.Outputs, v.History, v.Memories = outs, nil, nil
		return v, data
	case ReviewInput:
		outs, data := outputData(v.Outputs)
		v.Outputs = outs
		return v, data
	case PlanInput:
		data := append(historyData(v.History), memoryData(v.Memories)...)
		v.History, v.Memories = nil, nil
		return v, data
	case SuperviseInput:
		data := append(historyData(v.History), memoryData(v.Memories)...)
		v.History, v.Memories = nil, nil
		return v, data
	case SummarizeInput:
		data := historyData(v.History)
		v.History = nil
		return v, data
	case ExtractInput:
		data := []datum{{SourceDocument + v.Skill.Name, strings.Join(v.Sample, "\n")}}
		v.Sample = nil
		return v, data
	}
	return in, nil
}

// outputData takes the step outputs out of a task input: each becomes
// untrusted content of its step, and the input says where it is.
func outputData(in []StepOutput) ([]StepOutput, []datum) {
	var data []datum
	outs := make([]StepOutput, len(in))
	for i, o := range in {
		src := fmt.Sprintf("%s%d", SourceStepOutput, o.Step)
		data = append(data, datum{src, string(o.Value)})
		o.Value, _ = json.Marshal("in the " + UntrustedTag + " element of source " + src)
		outs[i] = o
	}
	return outs, data
}

// historyData is the session's past conversation as untrusted content.
func historyData(h []HistoryMessage) []datum {
	if len(h) == 0 {
		return nil
	}
	b, _ := json.Marshal(h)
	return []datum{{SourceHistory, string(b)}}
}

// memoryData is the recalled memories as untrusted content, one element
// each, in the order recalled (best first).
func memoryData(ms []RecalledMemory) []datum {
	data := make([]datum, 0, len(ms))
	for _, m := range ms {
		data = append(data, datum{SourceRecalled + m.ID, fmt.Sprintf("(%s memory, score %.2f) %s", m.Scope, m.Score, m.Text)})
	}
	return data
}

// delimitTools returns msgs with the content of every tool message
// delimited as the result of the tool its call named.
func delimitTools(msgs []Message) []Message {
	names := map[string]string{}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
		if m.Role == RoleTool {
			m.Content = Delimit(SourceTool+cmp.Or(names[m.ToolCallID], "unknown"), m.Content)
		}
		out[i] = m
	}
	return out
}
