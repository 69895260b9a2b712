package llm

import (
	"regexp"
	"slices"
	"strings"
)

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

// injectionRule is one form of an injection pattern: its anchors, words
// one of which every match holds, and the expression tried on the text
// around each anchor (before bytes before it, after bytes after it), in
// lower case. Content with no anchor costs a substring search per
// anchor, and each try reads a few hundred bytes at most.
type injectionRule struct {
	pattern       string
	anchors       []string
	before, after int
	re            *regexp.Regexp
}

// gap is what may stand between the words of a rule: the rest of the
// sentence, as far as the window reaches.
const gap = `[^.\n]*?`

var (
	askVerbs       = `(reveal|print|show|repeat|output|disclose|leak|dump|tell me|give me|send|share|include|post|email|forward)`
	promptObjects  = []string{"system prompt", "initial prompt", "hidden prompt", "your instructions", "your prompt", "your rules", "the instructions"}
	secretObjects  = []string{"api key", "api_key", "api-key", "apikey", "credential", "password", "secret", "access token", "access_token", "bearer token", "private key", "auth header", "auth token", "authorization header", "authorization token"}
	injectionRules = []injectionRule{
		{InjectionOverride, []string{"ignore", "disregard", "forget", "override", "bypass"}, 0, 140,
			regexp.MustCompile(`^(ignore|disregard|forget|override|bypass)\b` + gap + `\b(previous|prior|above|earlier|preceding|all|any|your|system|original)\b` +
				gap + `\b(instructions?|prompts?|rules|directions|directives|guidelines|constraints)\b`)},
		{InjectionOverride, []string{"instructions", "directives", "system prompt"}, 10, 20,
			regexp.MustCompile(`\b(new|updated|real|actual) (instructions|directives|system prompt)\s*:`)},
		{InjectionOverride, []string{"you are now", "you are no longer"}, 0, 80,
			regexp.MustCompile(`^you are (now|no longer)\b` + gap + `\b(assistant|agent|model|ai|bound|restricted)\b`)},
		{InjectionOverride, []string{"from now on"}, 0, 30, regexp.MustCompile(`^from now on,? (you|the assistant)\b`)},
		{InjectionToolCall, []string{"tool_call", "tool_use", "function_call", "invoke"}, 3, 80,
			regexp.MustCompile(`</?\s*(tool_calls?|tool_use|function_calls?|invoke)\b[^>]*>|"(tool_calls?|function_call|tool_use)"\s*:`)},
		{InjectionToolCall, []string{`"arguments"`, `"args"`, `"parameters"`}, 120, 20,
			regexp.MustCompile(`"(name|tool|function)"\s*:\s*"[^"]{1,80}"\s*,\s*"(arguments|args|parameters)"\s*:\s*\{`)},
		{InjectionRole, []string{"system", "assistant", "developer"}, 20, 20,
			regexp.MustCompile(`(?m)^[ \t]*(system|assistant|developer)[ \t]*:`)},
		{InjectionRole, []string{"<|", "[inst]", "[/inst]", "<<sys>>", "<</sys>>", UntrustedTag}, 3, 20,
			regexp.MustCompile(`<\|(im_start|im_end|system|assistant|user|eot_id|start_header_id)\|>|\[/?inst\]|<</?sys>>|<\s*/?\s*` + UntrustedTag)},
		{InjectionPrompt, promptObjects, 100, 25,
			regexp.MustCompile(`\b` + askVerbs + `\b` + gap + `\b(system prompt|initial prompt|hidden prompt|your (instructions|prompt|rules)|the instructions (you|above))`)},
		{InjectionCredential, secretObjects, 100, 25,
			regexp.MustCompile(`\b` + askVerbs + `\b` + gap + `\b(api[ _-]?keys?|credentials?|passwords?|secrets?|access[ _]tokens?|bearer tokens?|private keys?|auth(orization)? (header|token)s?)\b`)},
	}
	injectionOrder = []string{InjectionOverride, InjectionToolCall, InjectionRole, InjectionPrompt, InjectionCredential}
)

// jsonUnescape decodes the escapes of text in a JSON string (lower case),
// so that a tool result's JSON text is read as the model reads it.
var jsonUnescape = strings.NewReplacer(`\"`, `"`, `\n`, "\n", `\r`, "\r", `\t`, "\t", `\/`, "/", `\\`, `\`,
	`\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\u0027`, "'")

// MaxInjectionScan bounds the bytes of content SuspectInjection reads:
// instructions hidden past it in a larger result are not looked for.
const MaxInjectionScan = 256 << 10

// SuspectInjection reports which injection patterns content matches,
// in the order of their definition, or nil: instruction-like content in
// what a tool returned (an attempt to override instructions, tool-call
// syntax, a chat role or template marker, a request to reveal the system
// prompt or credentials). Matching ignores case, and reads at most
// MaxInjectionScan bytes, as they are and with JSON string escapes
// decoded (text in a JSON string has its quotes and line breaks escaped).
func SuspectInjection(content string) []string {
	if len(content) > MaxInjectionScan {
		content = content[:MaxInjectionScan]
	}
	texts := []string{strings.ToLower(content)}
	if strings.Contains(texts[0], `\`) {
		texts = append(texts, jsonUnescape.Replace(texts[0]))
	}
	found := map[string]bool{}
	for _, r := range injectionRules {
		if !found[r.pattern] && slices.ContainsFunc(texts, r.matches) {
			found[r.pattern] = true
		}
	}
	var hits []string
	for _, p := range injectionOrder {
		if found[p] {
			hits = append(hits, p)
		}
	}
	return hits
}

// matches reports whether the rule's expression matches text around one
// of its anchors.
func (r injectionRule) matches(text string) bool {
	for _, a := range r.anchors {
		for from := 0; ; {
			i := strings.Index(text[from:], a)
			if i < 0 {
				break
			}
			at := from + i
			if r.re.MatchString(text[max(0, at-r.before):min(len(text), at+len(a)+r.after)]) {
				return true
			}
			from = at + len(a)
		}
	}
	return false
}
