package tools

import "net/http"

// WrapTransport makes w's calls go through wrap(transport).
func WrapTransport(w *Webhooks, wrap func(http.RoundTripper) http.RoundTripper) { w.wrap = wrap }
