// Package api holds the HTTP API's contract: api/openapi.yaml, an OpenAPI
// 3.1 document of every route the ingress serves (handlers/ingress and the
// protocol adapters mounted on it), their request and response bodies,
// error codes, server-sent event chunks and authentication. It is embedded
// in the binary and served as JSON at GET /openapi.json (JSON) and as a
// reference page at GET /docs (Page), rendered on the server from the
// document with nothing fetched from elsewhere.
//
// The document's component schemas below its "Generated" line come from
// the Go wire types (TestWireSchemas; go test ./api -run TestWireSchemas
// -update rewrites them); the rest is written by hand. The tests of the
// ingress validate every request and answer they make against it
// (api/apitest).
package api
