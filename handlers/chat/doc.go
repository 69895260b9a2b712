// Package chat serves OpenAI's chat completions API over agentbus runs
// (POST /v1/chat/completions, GET /v1/models), mounted on the ingress as
// an ingress.Adapter.
package chat
