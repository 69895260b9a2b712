package tools

import "github.com/agentbus/agentbus/text"

// MaxLogExcerpt bounds what a log line carries of a tool's arguments or
// answer, in bytes.
const MaxLogExcerpt = 512

// Redact returns s with personal data and credentials masked
// (text.Redact), cut to MaxLogExcerpt bytes: what is logged about a
// webhook call goes through it.
func Redact(s string) string { return text.Redact(s, MaxLogExcerpt) }
