// Package anthropic is agentbus's provider for Anthropic's Messages API and
// for Claude on Amazon Bedrock, through the official SDK
// github.com/anthropics/anthropic-sdk-go and its Bedrock option (AWS
// credentials from the standard chain, requests signed with SigV4): tool
// use, structured output by forcing a "respond" tool whose input schema is
// the answer's, token streaming, and usage with cached tokens. The SDK
// retries 429, 5xx, 529 and lost connections with exponential backoff and
// jitter, honouring Retry-After and retry-after-ms; a call that still
// fails is llm.ErrUnavailable.
package anthropic
