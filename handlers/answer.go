package handlers

import (
	"net/http"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/runclient"
)

// WriteJSON answers an HTTP request of the API with v as JSON and status:
// the one encoding of the ingress's answers and the definitions API's.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers an error of the API: a runclient.APIError with its
// stable code.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	var e runclient.APIError
	e.Error.Code, e.Error.Message = code, msg
	WriteJSON(w, status, e)
}
