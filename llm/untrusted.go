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
// session's past conversation) reaches a model as data, never as an
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
	SourceHandoff    = "handoff:" // the context an agent handing a run over passed on, by agent
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
		v.Inputs = nil
		return v, data
	case SynthInput:
		var data []datum
		outs := make([]StepOutput, len(v.Outputs))
		for i, o := range v.Outputs {
			src := fmt.Sprintf("%s%d", SourceStepOutput, o.Step)
			data = append(data, datum{src, string(o.Value)})
			o.Value, _ = json.Marshal("in the " + UntrustedTag + " element of source " + src)
			outs[i] = o
		}
		data = append(data, historyData(v.History)...)
		v.Outputs, v.History = outs, nil
		return v, data
	case PlanInput:
		data := historyData(v.History)
		v.History = nil
		return v, data
	case SuperviseInput:
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

// historyData is the session's past conversation as untrusted content.
func historyData(h []HistoryMessage) []datum {
	if len(h) == 0 {
		return nil
	}
	b, _ := json.Marshal(h)
	return []datum{{SourceHistory, string(b)}}
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

// Injection patterns: what SuspectInjection reports.
const (
	// InjectionOverride is an attempt to override the model's
	// instructions ("ignore previous instructions", "you are now …").
	InjectionOverride = "instruction_override"
	// InjectionToolCall is tool-call syntax (function-call JSON, a
	// <tool_call> tag) in content a tool returned.
	InjectionToolCall = "tool_call_syntax"
	// InjectionRole is a chat role or template marker ("system:" at the
	// start of a line, <|im_start|>, [INST]) or the delimiter's own tag.
	InjectionRole = "role_marker"
	// InjectionPrompt asks to reveal the system prompt or instructions.
	InjectionPrompt = "prompt_disclosure"
	// InjectionCredential asks to reveal or send credentials.
	InjectionCredential = "credential_request"
)

// injectionPatterns are the patterns of instruction-like content, each
// a name and what it matches.
var injectionPatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{InjectionOverride, regexp.MustCompile(`(?i)` +
		`\b(ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(previous|prior|above|earlier|preceding|all|any|your|system|original)\b[^.\n]{0,30}?\b(instructions?|prompts?|rules|directions|directives|guidelines|constraints)\b` +
		`|\b(new|updated|real|actual) (instructions|directives|system prompt)\s*:` +
		`|\byou are (now|no longer)\b[^.\n]{0,40}?\b(assistant|agent|model|ai|bound|restricted)\b` +
		`|\bfrom now on,? (you|the assistant)\b`)},
	{InjectionToolCall, regexp.MustCompile(`(?i)` +
		`</?\s*(tool_call|tool_calls|tool_use|function_call|function_calls|invoke)\b[^>]*>` +
		`|"(tool_calls?|function_call|tool_use)"\s*:` +
		`|"(name|tool|function)"\s*:\s*"[^"]{1,80}"\s*,\s*"(arguments|args|parameters)"\s*:\s*\{`)},
	{InjectionRole, regexp.MustCompile(`(?im)` +
		`^\s*(system|assistant|developer)\s*:` +
		`|<\|(im_start|im_end|system|assistant|user|eot_id|start_header_id)\|>|\[/?INST\]|<</?SYS>>` +
		`|<\s*/?\s*` + UntrustedTag)},
	{InjectionPrompt, regexp.MustCompile(`(?i)` +
		`\b(reveal|print|show|repeat|output|disclose|leak|dump|tell me|give me|send|share)\b[^.\n]{0,40}?` +
		`\b(system prompt|initial prompt|hidden prompt|your (instructions|prompt|rules)|the instructions (you|above))`)},
	{InjectionCredential, regexp.MustCompile(`(?i)` +
		`\b(reveal|print|show|output|disclose|leak|dump|send|give|share|include|post|email|forward|tell me)\b[^.\n]{0,40}?` +
		`\b(api[ _-]?keys?|credentials?|passwords?|secrets?|access[ _-]tokens?|bearer tokens?|private keys?|auth(orization)? (header|token)s?)\b`)},
}

// MaxInjectionScan bounds the bytes of content SuspectInjection reads:
// instructions hidden past it in a larger result are not looked for.
const MaxInjectionScan = 256 << 10

// SuspectInjection reports which injection patterns content matches,
// in the order of their definition, or nil: instruction-like content in
// what a tool returned (an attempt to override instructions, tool-call
// syntax, a chat role marker, a request to reveal the system prompt or
// credentials). It reads at most MaxInjectionScan bytes.
//
// Content that is JSON is read as it is and as its string values, decoded
// (a tool's text in a JSON string has its quotes and line breaks escaped).
func SuspectInjection(content string) []string {
	if len(content) > MaxInjectionScan {
		content = content[:MaxInjectionScan]
	}
	texts := []string{content}
	var v any
	if json.Unmarshal([]byte(content), &v) == nil {
		texts = appendStrings(texts, v)
	}
	var hits []string
	for _, p := range injectionPatterns {
		if slices.ContainsFunc(texts, p.re.MatchString) {
			hits = append(hits, p.name)
		}
	}
	return hits
}

// appendStrings appends the string values in v, at any depth, to out.
func appendStrings(out []string, v any) []string {
	switch x := v.(type) {
	case string:
		return append(out, x)
	case map[string]any:
		for _, e := range x {
			out = appendStrings(out, e)
		}
	case []any:
		for _, e := range x {
			out = appendStrings(out, e)
		}
	}
	return out
}
