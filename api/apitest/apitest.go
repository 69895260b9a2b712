// Package apitest holds the ingress's HTTP traffic in tests to api's
// OpenAPI document: Wrap validates every request a test makes and every
// answer it gets (kin-openapi's openapi3filter, JSON Schema 2020-12 as
// OpenAPI 3.1 says) and fails the test on drift. Tests only: no binary
// links it.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/api"
)

// Contract is the loaded document and its router.
type Contract struct {
	Doc    *openapi3.T
	router routers.Router
	common map[string][]string
}

// Load loads and validates api's document once.
var Load = sync.OnceValues(func() (*Contract, error) {
	raw, err := api.JSON()
	if err != nil {
		return nil, err
	}
	return LoadDocument(raw)
})

// LoadDocument loads the OpenAPI 3.1 document raw (JSON or YAML) and
// validates it.
func LoadDocument(raw []byte) (*Contract, error) {
	registerDecoders()
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("apitest: load the document: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("apitest: the document is OpenAPI %s, not 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("apitest: the document is not valid OpenAPI: %w", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("apitest: route the document: %w", err)
	}
	c := &Contract{Doc: doc, router: router}
	if err := decodeExtension(doc.Extensions["x-common-error-codes"], &c.common); err != nil {
		return nil, fmt.Errorf("apitest: x-common-error-codes: %w", err)
	}
	return c, nil
}

// TB is what Wrap reports drift to (a *testing.T).
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Wrap returns h, holding each exchange to the document: tb fails with
// what drifted once the test ends (an answer may end after the test's own
// goroutine returns, so the failures are reported at its cleanup).
func Wrap(tb TB, h http.Handler) http.Handler {
	tb.Helper()
	c, err := Load()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	var (
		mu    sync.Mutex
		drift []string
		ended bool
	)
	tb.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		ended = true
		for _, d := range drift {
			tb.Errorf("api/openapi.yaml and the ingress disagree: %s", d)
		}
	})
	return c.Handler(h, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			drift = append(drift, err.Error())
		}
	})
}

// Handler returns h, calling fail with each exchange the document does
// not allow.
func (c *Contract) Handler(h http.Handler, fail func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &teeBody{r: r.Body}
		r.Body = body
		rec := &recorder{w: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if err := c.Check(r, body.buf.Bytes(), rec.status, w.Header(), rec.body.Bytes()); err != nil {
			fail(fmt.Errorf("%s %s: %w", r.Method, r.URL.RequestURI(), err))
		}
	})
}

// Check holds one exchange to the document: the request as the server
// read it (reqBody) and the answer. A request the document refuses must
// have been refused (an error status); an answer must be one the operation
// documents, its body valid against its schema and, for an error, its
// code one of the operation's x-error-codes (or the document's
// x-common-error-codes, for an operation that authenticates).
func (c *Contract) Check(r *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	ctx := context.Background()
	req := r.Clone(ctx)
	req.URL.Scheme, req.URL.Host = "", "" // as a server reads it: the document's server is "/"
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if status >= 400 {
			return nil // the ingress serves no such route, as the document says
		}
		return fmt.Errorf("an undocumented route answered %d", status)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true, MultiError: true}
	if string(bytes.TrimSpace(reqBody)) == "null" {
		reqBody = []byte("{}") // the ingress reads a null body as an empty object
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	if req.Header.Get("Content-Type") == "" && len(reqBody) > 0 {
		req.Header.Set("Content-Type", "application/json") // the ingress reads any body as JSON
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if reqErr := openapi3filter.ValidateRequest(ctx, in); reqErr != nil && status < 400 {
		return fmt.Errorf("the document refuses the request, the ingress answered %d: %w", status, reqErr)
	}
	respOpts := *opts
	mediaType, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if mediaType != "application/json" && mediaType != "text/event-stream" {
		respOpts.ExcludeResponseBody = true
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Options: &respOpts}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("answer %d: %w (body %.300s)", status, err, body)
	}
	if status >= 400 && mediaType == "application/json" {
		return c.checkCode(route, status, body)
	}
	return nil
}

// checkCode holds an error's code to the codes its operation documents.
func (c *Contract) checkCode(route *routers.Route, status int, body []byte) error {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Errorf("error %d: %w", status, err)
	}
	var codes map[string][]string
	if err := decodeExtension(route.Operation.Extensions["x-error-codes"], &codes); err != nil {
		return fmt.Errorf("x-error-codes: %w", err)
	}
	st := strconv.Itoa(status)
	allowed := codes[st]
	if route.Operation.Security == nil || len(*route.Operation.Security) != 1 || len((*route.Operation.Security)[0]) != 0 {
		allowed = append(slices.Clone(allowed), c.common[st]...)
	}
	if !slices.Contains(allowed, e.Error.Code) {
		return fmt.Errorf("error %d %q is not among the operation's x-error-codes %v", status, e.Error.Code, allowed)
	}
	return nil
}

func decodeExtension(v any, into any) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

var registerDecoders = sync.OnceFunc(func() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", decodeEventStream)
})

// decodeEventStream reads a server-sent event stream as the list of its
// complete events' data, each decoded as JSON when it is ("[DONE]" stays
// a string): the value a stream's schema describes.
func decodeEventStream(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	items := []any{}
	var data []string
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				items = append(items, eventData(strings.Join(data, "\n")))
			}
			data = nil
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return items, nil // an event the stream did not finish is left out
}

func eventData(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	return v
}

// teeBody keeps what the handler read of a request's body.
type teeBody struct {
	r   io.ReadCloser
	buf bytes.Buffer
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.buf.Write(p[:n])
	return n, err
}

func (b *teeBody) Close() error { return b.r.Close() }

// recorder keeps the status and body of an answer it passes on.
type recorder struct {
	w      http.ResponseWriter
	status int
	wrote  bool
	mu     sync.Mutex
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
	r.w.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	r.mu.Lock()
	r.body.Write(p)
	r.mu.Unlock()
	return r.w.Write(p)
}

// Flush passes a streamed answer's flushes on.
func (r *recorder) Flush() {
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }
