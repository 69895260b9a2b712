package events

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
)

// ContentTypeBatch is the content type of a message that holds several
// events: the CloudEvents JSON batch format (an array of events in
// structured mode).
const ContentTypeBatch = "application/cloudevents-batch+json"

// HeaderTrail is the header in which a hop's first output on AGENT
// carries the hop's audit trail: its audit events in the CloudEvents JSON
// batch format (compact JSON, one line). The output stays a binary-mode
// event whose body is its own data; the projector reads the trail from
// the header (Trail). So a hop's outputs and its trail are stored by one
// publish, and nothing is indexed before it is durable in the stream.
const HeaderTrail = "Agentbus-Trail"

// encodeTrail encodes the audit events evs, all of one tenant, in the
// CloudEvents JSON batch format, and derives the trail's id from the
// events' ids, so a redelivered hop that emits them again is dropped as
// a duplicate. data is buf's, valid until buf is written again.
func encodeTrail(buf *bytes.Buffer, evs []event.Event) (data []byte, id string, err error) {
	tenant := Ext(evs[0], ExtTenant)
	buf.Reset()
	ids := sha256.New()
	buf.WriteByte('[')
	for i, ev := range evs {
		if err := validate(ev); err != nil {
			return nil, "", fmt.Errorf("events: invalid event: %w", err)
		}
		if Ext(ev, ExtTenant) != tenant {
			return nil, "", fmt.Errorf("%w: one hop's audit events name tenants %q and %q", ErrInvalidData, tenant, Ext(ev, ExtTenant))
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		// An event of the shape agentbus builds is appended directly;
		// any other is written by WriteJson, which writes the same JSON
		// (json.Marshal would validate and compact it a second time).
		if b, ok := appendEvent(buf.AvailableBuffer(), &ev); ok {
			buf.Write(b)
		} else if err := event.WriteJson(&ev, buf); err != nil {
			return nil, "", fmt.Errorf("events: encode %s: %w", ev.ID(), err)
		}
		ids.Write([]byte(ev.ID()))
		ids.Write([]byte{0})
	}
	buf.WriteByte(']')
	if !ValidToken(tenant) {
		return nil, "", fmt.Errorf("%w: audit trail of tenant %q", ErrInvalidToken, tenant)
	}
	data = buf.Bytes()
	if bytes.ContainsAny(data, "\r\n") {
		// A header holds one line: data set from indented JSON is
		// compacted (JSON strings escape their line breaks).
		var c bytes.Buffer
		if err := json.Compact(&c, data); err != nil {
			return nil, "", fmt.Errorf("events: audit trail: %w", err)
		}
		data = c.Bytes()
	}
	return data, "trail-" + hex.EncodeToString(ids.Sum(nil)[:16]), nil
}

// appendEvent appends ev in the structured JSON format, as event.WriteJson
// writes it (the same members, in the same order, the extensions sorted by
// name), when ev has the shape agentbus builds: a CloudEvents 1.0 context
// with no subject or data schema, JSON data or none, and string
// extensions. ok is false for any other event, and for a string that is
// not valid UTF-8, both left to WriteJson.
func appendEvent(dst []byte, ev *event.Event) (_ []byte, ok bool) {
	ec, isV1 := ev.Context.(*event.EventContextV1)
	if !isV1 || ec.Subject != nil || ec.DataSchema != nil || ev.DataBase64 ||
		(ec.DataContentType != nil && *ec.DataContentType != event.ApplicationJSON) {
		return dst, false
	}
	var names [8]string
	exts := names[:0]
	for name, v := range ec.Extensions {
		if _, isString := v.(string); !isString {
			return dst, false
		}
		exts = append(exts, name)
	}
	slices.Sort(exts)
	q := quoter{dst: append(dst, `{"specversion":"1.0","id":`...)}
	q.quote(ec.ID)
	q.member("source", sourceOf(*ev))
	q.member("type", ec.Type)
	if ec.DataContentType != nil {
		q.member("datacontenttype", *ec.DataContentType)
	}
	if ec.Time != nil {
		q.member("time", ec.Time.Time.UTC().Format(time.RFC3339Nano))
	}
	if ev.DataEncoded != nil {
		q.dst = append(append(q.dst, `,"data":`...), ev.DataEncoded...)
	}
	for _, name := range exts {
		q.member(name, ec.Extensions[name].(string))
	}
	if q.err != nil {
		return dst, false
	}
	return append(q.dst, '}'), true
}

// quoter appends JSON strings, remembering the first that failed.
type quoter struct {
	dst []byte
	err error
}

func (q *quoter) quote(s string) {
	var err error
	if q.dst, err = jsontext.AppendQuote(q.dst, s); err != nil && q.err == nil {
		q.err = err
	}
}

// member appends a member after another: a comma, name, a colon, value.
func (q *quoter) member(name, value string) {
	q.dst = append(q.dst, ',')
	q.quote(name)
	q.dst = append(q.dst, ':')
	q.quote(value)
}

// trailBuffers are the buffers trails are encoded in, reused from hop to
// hop: a trail is copied out of its buffer once, into its message.
var trailBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxTrailBuffer bounds the buffers kept for reuse.
const maxTrailBuffer = 256 << 10

// withTrailBuffer calls fn with a buffer of the pool.
func withTrailBuffer(fn func(buf *bytes.Buffer) error) error {
	buf := trailBuffers.Get().(*bytes.Buffer)
	err := fn(buf)
	if buf.Cap() <= maxTrailBuffer {
		trailBuffers.Put(buf)
	}
	return err
}

// packAudit returns one message holding the audit events evs, all of one
// tenant, in the CloudEvents JSON batch format, on the tenant's
// TrailSubject: the trail of a hop that has no output on AGENT to carry
// it (AttachTrail).
func packAudit(evs []event.Event) (*nats.Msg, error) {
	m := nats.NewMsg(TrailSubject(Ext(evs[0], ExtTenant)))
	err := withTrailBuffer(func(buf *bytes.Buffer) error {
		data, id, err := encodeTrail(buf, evs)
		m.Header.Set(headerContentType, ContentTypeBatch)
		m.Header.Set(nats.MsgIdHdr, id)
		m.Data = bytes.Clone(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// attachTrail sets the audit events evs as m's trail (HeaderTrail).
func attachTrail(m *nats.Msg, evs []event.Event) error {
	return withTrailBuffer(func(buf *bytes.Buffer) error {
		data, _, err := encodeTrail(buf, evs)
		if err == nil {
			m.Header.Set(HeaderTrail, string(data))
		}
		return err
	})
}

// Trail decodes the audit events a message of AGENT carries: the trail in
// its header, or, on a TrailSubject, the events it holds. A message with
// no trail has none (nil). Any failure wraps ErrDecode and is permanent.
func Trail(header nats.Header, subject string, data []byte) ([]event.Event, error) {
	if IsTrailSubject(subject) {
		return FromMsgs(header, data)
	}
	t := header.Get(HeaderTrail)
	if t == "" {
		return nil, nil
	}
	return unpackBatch([]byte(t))
}

// FromMsgs decodes the events a message holds: a batch's (see
// ContentTypeBatch), or the one of a binary-mode message (FromMsg). Any
// failure wraps ErrDecode and is permanent.
func FromMsgs(header nats.Header, data []byte) ([]event.Event, error) {
	return fromMsgs(header, data, true)
}

// fromMsgs is FromMsgs; checkJSON as fromMsg's (a batch's data is always
// checked, by the pass that unpacks it).
func fromMsgs(header nats.Header, data []byte, checkJSON bool) ([]event.Event, error) {
	if isBatch(header) {
		return unpackBatch(data)
	}
	ev, err := fromMsg(header, data, checkJSON)
	if err != nil {
		return nil, err
	}
	return []event.Event{ev}, nil
}

// isBatch reports whether a message holds a batch of events.
func isBatch(header nats.Header) bool {
	return strings.EqualFold(header.Get(headerContentType), ContentTypeBatch)
}

// batchOptions read a batch as encoding/json reads JSON: invalid UTF-8
// and duplicate names are accepted, as FromMsg accepts them in one
// event's data.
var batchOptions = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// unpackBatch decodes the events of a batch message, each checked as
// FromMsg checks one, in one pass over the batch (the data of each event
// is checked as JSON by that pass). Any failure wraps ErrDecode and is
// permanent.
func unpackBatch(data []byte) ([]event.Event, error) {
	var wire []wireEvent
	if err := jsonv2.Unmarshal(data, &wire, batchOptions); err != nil {
		return nil, Permanent(fmt.Errorf("%w: batch: %v", ErrDecode, err))
	}
	if len(wire) == 0 {
		return nil, Permanent(fmt.Errorf("%w: empty batch", ErrDecode))
	}
	out := make([]event.Event, len(wire))
	for i := range wire {
		ev, err := wire[i].event()
		if err != nil {
			return nil, Permanent(fmt.Errorf("%w: batch event %d: %v", ErrDecode, i, err))
		}
		out[i] = ev
	}
	return out, nil
}

// wireEvent is one event of a batch: a CloudEvent in the structured JSON
// format, its extensions being the members the format does not name.
type wireEvent struct {
	SpecVersion     string         `json:"specversion"`
	ID              string         `json:"id"`
	Source          string         `json:"source"`
	Type            string         `json:"type"`
	Subject         *string        `json:"subject"`
	Time            string         `json:"time"`
	DataContentType *string        `json:"datacontenttype"`
	DataSchema      *string        `json:"dataschema"`
	Data            jsontext.Value `json:"data"`
	DataBase64      []byte         `json:"data_base64"` // decoded from base64
	// The extensions agentbus sets, then any other.
	Tenant      string         `json:"tenantid"`
	Session     string         `json:"sessionid"`
	Run         string         `json:"runid"`
	Task        string         `json:"taskid"`
	Correlation string         `json:"correlationid"`
	TraceParent string         `json:"traceparent"`
	Extensions  map[string]any `json:",embed"`
}

// extensions sets the extensions of w on ec.
func (w *wireEvent) extensions(ec *event.EventContextV1) error {
	known := [...]struct{ name, value string }{{ExtTenant, w.Tenant}, {ExtSession, w.Session}, {ExtRun, w.Run},
		{ExtTask, w.Task}, {ExtCorrelation, w.Correlation}, {ExtTraceParent, w.TraceParent}}
	ec.Extensions = make(map[string]any, len(known)+len(w.Extensions))
	for _, x := range known {
		if x.value != "" {
			ec.Extensions[x.name] = x.value // a string is a valid value of any extension
		}
	}
	for name, v := range w.Extensions {
		if err := ec.SetExtension(name, v); err != nil {
			return err
		}
	}
	if len(ec.Extensions) == 0 {
		ec.Extensions = nil
	}
	return nil
}

// sources are the event sources parsed so far: a handful, one per role;
// at most maxSources are kept.
var (
	sources  sync.Map // string → types.URIRef
	nSources atomic.Int32
)

const maxSources = 256

// sourceRef is the URI reference of an event's source. ok is false when
// it does not parse.
func sourceRef(s string) (types.URIRef, bool) {
	if ref, ok := sources.Load(s); ok {
		return ref.(types.URIRef), true
	}
	ref := types.ParseURIRef(s)
	if ref == nil {
		return types.URIRef{}, false
	}
	if nSources.Add(1) <= maxSources {
		sources.Store(s, *ref)
	}
	return *ref, true
}

// event is w as an event, checked as FromMsg checks one.
func (w *wireEvent) event() (event.Event, error) {
	if w.SpecVersion != event.CloudEventsVersionV1 {
		return event.Event{}, fmt.Errorf("specversion %q", w.SpecVersion)
	}
	ec := &event.EventContextV1{ID: w.ID, Type: w.Type, DataContentType: w.DataContentType}
	if w.Source != "" {
		src, ok := sourceRef(w.Source)
		if !ok {
			return event.Event{}, fmt.Errorf("source %q", w.Source)
		}
		ec.Source = src
	}
	if w.Subject != nil && *w.Subject != "" {
		ec.Subject = w.Subject
	}
	if w.DataSchema != nil && *w.DataSchema != "" {
		if ec.DataSchema = types.ParseURI(*w.DataSchema); ec.DataSchema == nil {
			return event.Event{}, fmt.Errorf("dataschema %q", *w.DataSchema)
		}
	}
	if w.Time != "" {
		t, err := time.Parse(time.RFC3339Nano, w.Time)
		if err != nil {
			return event.Event{}, fmt.Errorf("time %q", w.Time)
		}
		ec.Time = &types.Timestamp{Time: t}
	}
	if err := w.extensions(ec); err != nil {
		return event.Event{}, err
	}
	ev := event.Event{Context: ec, DataEncoded: w.Data}
	if w.DataBase64 != nil {
		ev.DataEncoded, ev.DataBase64 = w.DataBase64, true
		if ct := ev.DataContentType(); (ct == "" || ct == event.ApplicationJSON) && !json.Valid(ev.DataEncoded) {
			return ev, errors.New("data is not JSON")
		}
	}
	if err := validate(ev); err != nil {
		return ev, err
	}
	return ev, nil
}

type carrierKey struct{}

// withCarrier is ctx for the handlers of a trail that rides in the header
// of the message of subject with body data (none on a TrailSubject).
func withCarrier(ctx context.Context, subject string, data []byte) context.Context {
	if IsTrailSubject(subject) {
		return ctx
	}
	return WithCarrier(ctx, data)
}

// WithCarrier returns ctx for the handlers of a trail carried by a
// message whose body is data (see Carrier): what a worker reading trails
// gives its handler, for a handler called directly.
func WithCarrier(ctx context.Context, data []byte) context.Context {
	return context.WithValue(ctx, carrierKey{}, data)
}

// Carrier returns the body of the message whose header carries the trail
// the handler running with ctx was handed (HeaderTrail): the data of the
// hop's first output on AGENT, so an audit event may refer to what that
// output holds instead of repeating it. ok is false for a trail published
// on its own (TrailSubject) and outside a worker reading trails. The
// bytes are the message's: the caller must not change them.
func Carrier(ctx context.Context) (data []byte, ok bool) {
	data, ok = ctx.Value(carrierKey{}).([]byte)
	return data, ok
}

type deferredKey struct{}

// deferred are the waits the handlers of one message deferred (see
// Defer).
type deferred struct {
	mu    sync.Mutex
	waits []func(context.Context) error
}

// wait runs every wait, in order, even after one failed, and returns the
// first error.
func (d *deferred) wait(ctx context.Context) error {
	d.mu.Lock()
	waits := d.waits
	d.waits = nil
	d.mu.Unlock()
	var first error
	for _, wait := range waits {
		if err := wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Defer registers wait to finish the handling of the message whose
// handler runs with ctx (one event, or an event of a batch). The worker
// runs every wait, in order, once the message's handlers have returned
// and their outputs are published (or the hop failed), and acknowledges
// the message only if they all succeed: a failed wait fails the hop like
// a handler error (retried with backoff, dead-lettered when permanent or
// out of deliveries). Every wait runs even after a failure, since one may
// owe other messages a write.
//
// So a handler can start a write, return its outputs and have the worker
// await the write while the outputs are published, and a batch's
// handlers can queue their writes before any is awaited. What a wait
// stores is stored before the input is acked, never before its outputs
// are published: a wait may hold only what no consumer of the outputs
// reads (a redelivery after a failed wait publishes the same derived ids
// again, which the duplicate window drops). Defer reports false outside a
// worker (a handler called directly), where the handler waits itself.
func Defer(ctx context.Context, wait func(context.Context) error) bool {
	d, _ := ctx.Value(deferredKey{}).(*deferred)
	if d == nil {
		return false
	}
	d.mu.Lock()
	d.waits = append(d.waits, wait)
	d.mu.Unlock()
	return true
}

// Deferring returns ctx set up as a worker sets up a handler's, for a
// handler run outside a worker as a worker would run it: Defer registers
// its waits, and wait runs them, in order, as the worker does once the
// outputs are published.
func Deferring(ctx context.Context) (_ context.Context, wait func(context.Context) error) {
	d := &deferred{}
	return context.WithValue(ctx, deferredKey{}, d), d.wait
}
