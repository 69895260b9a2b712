// Package openai is agentbus's provider for OpenAI and every server that
// speaks the OpenAI chat completions API (vLLM, Ollama, LiteLLM…), through
// the official SDK github.com/openai/openai-go/v3: tool calls, json_schema
// structured output, token streaming, usage with cached tokens, and an
// OpenAI-compatible embeddings Embedder. The SDK retries 429, 5xx and lost
// connections with exponential backoff and jitter, honouring Retry-After
// and retry-after-ms; a call that still fails is llm.ErrUnavailable.
package openai
