// Package text is agentbus's one tokenizer for word relevance: the skill
// ranker (skills) and the offline model's router and planner (llm/offline)
// compare texts by the words Tokens returns, so a skill name, a
// description and a task all split, lower-case and stem the same way.
package text
