// Package openai is agentbus's provider for OpenAI and every server that
// speaks the OpenAI chat completions API (vLLM, Ollama, LiteLLM…), through
// the official SDK github.com/openai/openai-go/v3: tool calls, structured
// output, token streaming, usage with cached tokens, and an
// OpenAI-compatible embeddings Embedder. Servers differ in how they take a
// schema or tools; the provider tries the Ladder of modes (json_schema,
// json_object, tool_forcing, prompt) and remembers, per base URL and model,
// the first one a server takes (modes.go, shape.go). The SDK retries 429, 5xx and lost
// connections with exponential backoff and jitter, honouring Retry-After
// and retry-after-ms; a call that still fails is llm.ErrUnavailable.
package openai
