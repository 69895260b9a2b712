package events

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	json "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// idNamespace is the UUIDv5 namespace of derived event ids.
var idNamespace = uuid.MustParse("6f1c3c1e-52b4-4a52-9a55-8d1f3b6a7c10")

// DeriveID returns the deterministic id of an output: a UUIDv5 of the input
// id and the output's key. A worker that handles the same input twice emits
// the same ids, and JetStream's duplicate window drops the second copy.
func DeriveID(inputID string, key any) string {
	name := make([]byte, 0, len(inputID)+48)
	name = append(append(name, inputID...), '/')
	// The keys agentbus uses, written as %v writes them, without fmt.
	switch k := key.(type) {
	case string:
		name = append(name, k...)
	case int:
		name = strconv.AppendInt(name, int64(k), 10)
	default:
		name = fmt.Append(name, k)
	}
	return uuid.NewSHA1(idNamespace, name).String()
}

// Meta is the agentbus context of an event, carried as CloudEvents extensions.
type Meta struct {
	Tenant        string
	Session       string
	Run           string
	Task          string
	Correlation   string
	TraceParent   string
	SourceProcess string
}

// New builds an event of type typ with id, meta and a JSON data payload.
func New(id, typ string, meta Meta, data any) (event.Event, error) {
	ev := newEvent(id, typ, meta)
	b, err := json.Marshal(data)
	if err != nil {
		return ev, fmt.Errorf("events: encode data of %s: %w", typ, err)
	}
	setJSON(&ev, b)
	return ev, nil
}

// newEvent builds an event of type typ with id and meta, and no data.
func newEvent(id, typ string, meta Meta) event.Event {
	src := meta.SourceProcess
	if src == "" {
		src = "agentbus"
	}
	source, ok := sourceRef(sourcePrefix + src)
	if !ok {
		// What the SDK's setters make of a source that does not parse
		// (an event that fails validation when published).
		ev := event.New()
		ev.SetID(id)
		ev.SetType(typ)
		ev.SetSource(sourcePrefix + src)
		ev.SetTime(time.Now().UTC())
		setMeta(&ev, meta)
		return ev
	}
	// The context is built directly rather than through the SDK's
	// setters, which parse the source's URI and check each extension's
	// name and value on every event a hop emits (seven or so): the
	// source is parsed once per process (sourceRef), and the extensions
	// are the known lowercase names with string values.
	ec := &event.EventContextV1{ID: strings.TrimSpace(id), Type: strings.TrimSpace(typ), Source: source,
		Time: &types.Timestamp{Time: time.Now().UTC()}}
	known := [...]struct{ name, value string }{{ExtTenant, meta.Tenant}, {ExtSession, meta.Session}, {ExtRun, meta.Run},
		{ExtTask, meta.Task}, {ExtCorrelation, meta.Correlation}, {ExtTraceParent, meta.TraceParent}}
	for _, x := range known {
		if x.value == "" {
			continue
		}
		if ec.Extensions == nil {
			ec.Extensions = make(map[string]any, len(known)+1) // room for deliverat too
		}
		ec.Extensions[x.name] = x.value
	}
	return event.Event{Context: ec}
}

// setMeta sets meta's extensions on ev.
func setMeta(ev *event.Event, meta Meta) {
	setExt(ev, ExtTenant, meta.Tenant)
	setExt(ev, ExtSession, meta.Session)
	setExt(ev, ExtRun, meta.Run)
	setExt(ev, ExtTask, meta.Task)
	setExt(ev, ExtCorrelation, meta.Correlation)
	setExt(ev, ExtTraceParent, meta.TraceParent)
}

// setJSON sets data, JSON, as ev's data: directly rather than with
// SetData, whose JSON codec is encoding/json's (the data is about half of
// a hop's JSON work).
func setJSON(ev *event.Event, data []byte) {
	if ec, ok := ev.Context.(*event.EventContextV1); ok {
		ec.DataContentType = &contentTypeJSON // shared: the SDK's setters replace it, never write through it
	} else {
		ev.SetDataContentType(event.ApplicationJSON)
	}
	ev.DataEncoded, ev.DataBase64 = data, false
}

// contentTypeJSON is the content type of every event newEvent builds.
var contentTypeJSON = event.ApplicationJSON

// Child builds an output of parent: its id is derived from the parent's id
// and key, and it inherits the parent's tenant, session, run, correlation
// and trace context.
func Child(parent event.Event, key any, typ string, data any) (event.Event, error) {
	return New(DeriveID(parent.ID(), key), typ, childMeta(parent), data)
}

// ChildJSON is Child with data that is JSON already, as json.Marshal
// writes it (Audit.AppendJSON's): it is the event's data as it is.
func ChildJSON(parent event.Event, key any, typ string, data []byte) event.Event {
	ev := newEvent(DeriveID(parent.ID(), key), typ, childMeta(parent))
	setJSON(&ev, data)
	return ev
}

// childMeta is the meta of parent's outputs.
func childMeta(parent event.Event) Meta {
	m := MetaOf(parent)
	m.SourceProcess = strings.TrimPrefix(sourceOf(parent), sourcePrefix)
	return m
}

// sourceOf is ev.Source(): for a source that is a plain path, as every
// agentbus source is, without writing its URI out again.
func sourceOf(ev event.Event) string {
	if ec, ok := ev.Context.(*event.EventContextV1); ok {
		if u := ec.Source.URL; u.Scheme == "" && u.Opaque == "" && u.User == nil && u.Host == "" && u.RawPath == "" &&
			u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery && !strings.HasPrefix(u.Path, "//") && validPathChars(u.Path) {
			return u.Path
		}
	}
	return ev.Source()
}

// validPathChars reports whether path holds only characters a URI's path
// writes as they are: letters, digits and "-._~/".
func validPathChars(path string) bool {
	for i := range len(path) {
		c := path[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/", c) >= 0) {
			return false
		}
	}
	return true
}

// MetaOf returns the agentbus extensions of ev.
func MetaOf(ev event.Event) Meta {
	return Meta{
		Tenant:      Ext(ev, ExtTenant),
		Session:     Ext(ev, ExtSession),
		Run:         Ext(ev, ExtRun),
		Task:        Ext(ev, ExtTask),
		Correlation: Ext(ev, ExtCorrelation),
		TraceParent: Ext(ev, ExtTraceParent),
	}
}

// Ext returns the string value of extension name, or "".
func Ext(ev event.Event, name string) string {
	if ev.Context == nil {
		return ""
	}
	// A v1.0 context's extensions are read straight from its map (their
	// names are stored lowercase); GetExtension would build an error for
	// each one missing, and Extensions() would copy them all.
	if ec, ok := ev.Context.(*event.EventContextV1); ok {
		s, _ := ec.Extensions[strings.ToLower(name)].(string)
		return s
	}
	v, err := ev.Context.GetExtension(name)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	return s
}

// SetExt sets extension name on ev; an empty value is left out.
func SetExt(ev *event.Event, name, value string) { setExt(ev, name, value) }

func setExt(ev *event.Event, name, value string) {
	if value != "" {
		ev.SetExtension(name, value)
	}
}

// Binary-mode header names of the CloudEvents NATS protocol binding.
const (
	headerPrefix      = "ce-"
	headerContentType = "content-type"
)

// ToMsg encodes ev in the binary content mode of the CloudEvents NATS
// binding: attributes and extensions as ce- headers, data as the body. The
// subject is derived from the type and tenant, and Nats-Msg-Id is the event
// id so JetStream drops re-emissions.
func ToMsg(ev event.Event) (*nats.Msg, error) {
	if err := validate(ev); err != nil {
		return nil, fmt.Errorf("events: invalid event: %w", err)
	}
	subject, err := subjectOf(ev)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(subject)
	h := m.Header
	h.Set(headerPrefix+"specversion", ev.SpecVersion())
	h.Set(headerPrefix+"id", ev.ID())
	h.Set(headerPrefix+"type", ev.Type())
	h.Set(headerPrefix+"source", ev.Source())
	if !ev.Time().IsZero() {
		h.Set(headerPrefix+"time", ev.Time().UTC().Format(time.RFC3339Nano))
	}
	if s := ev.Subject(); s != "" {
		h.Set(headerPrefix+"subject", s)
	}
	if ct := ev.DataContentType(); ct != "" {
		h.Set(headerContentType, ct)
	}
	for name, v := range ev.Extensions() {
		if name == ExtDeliverAt {
			continue
		}
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		h.Set(headerPrefix+name, s)
	}
	h.Set(nats.MsgIdHdr, ev.ID())
	m.Data = ev.Data()
	if at := Ext(ev, ExtDeliverAt); at != "" {
		if err := schedule(m, Ext(ev, ExtTenant), ev.ID(), at); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// validate is ev.Validate, which checks the attributes of ev, with the
// same verdict; an event of the shape agentbus builds (CloudEvents 1.0,
// JSON data or none, no subject or data schema) is checked without the
// allocations of Validate (its error map, the source's URI written out,
// the media type parsed), since every event is checked on each publish
// and each decode.
func validate(ev event.Event) error {
	ec, ok := ev.Context.(*event.EventContextV1)
	if ok && len(ev.FieldErrors) == 0 && ec.Subject == nil && ec.DataSchema == nil &&
		(ec.DataContentType == nil || *ec.DataContentType == event.ApplicationJSON) &&
		strings.TrimSpace(ec.ID) != "" && strings.TrimSpace(ec.Type) != "" && strings.TrimSpace(ec.Source.Path) != "" {
		return nil // what Validate would check, and find, of this shape
	}
	return ev.Validate()
}

// schedule turns m into a scheduled message: it waits on its schedule
// subject, and at the time the server publishes it on m's subject.
func schedule(m *nats.Msg, tenant, id, at string) error {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return fmt.Errorf("events: %s %q: %w", ExtDeliverAt, at, err)
	}
	if !ValidToken(id) {
		return fmt.Errorf("%w: scheduled event id %q", ErrInvalidToken, id)
	}
	m.Header.Set("Nats-Schedule", "@at "+t.UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339))
	m.Header.Set("Nats-Schedule-Target", m.Subject)
	m.Subject = ScheduleSubject(tenant, id)
	return nil
}

// subjectOf is the subject ev is published on: Subject of its type and
// tenant, or the session's reply subject for a reply chunk.
func subjectOf(ev event.Event) (string, error) {
	tenant := Ext(ev, ExtTenant)
	if ev.Type() != TypeReplyChunk {
		return Subject(ev.Type(), tenant)
	}
	session := Ext(ev, ExtSession)
	if !ValidToken(tenant) || !ValidToken(session) {
		return "", fmt.Errorf("%w: reply chunk of tenant %q, session %q", ErrInvalidToken, tenant, session)
	}
	return ReplySubject(tenant, session), nil
}

// FromMsg decodes a binary-mode CloudEvents NATS message. Any failure wraps
// ErrDecode and is permanent.
func FromMsg(header nats.Header, data []byte) (event.Event, error) {
	return fromMsg(header, data, true)
}

// fromMsg is FromMsg; with checkJSON false, JSON data is not checked to be
// JSON: the caller decodes it strictly, which checks it in the same pass.
func fromMsg(header nats.Header, data []byte, checkJSON bool) (event.Event, error) {
	ev := event.New()
	lower := make(map[string]string, len(header))
	for name, vals := range header {
		if len(vals) > 0 {
			lower[strings.ToLower(name)] = vals[0]
		}
	}
	get := func(name string) string { return lower[headerPrefix+name] }
	if v := get("specversion"); v != event.CloudEventsVersionV1 {
		return ev, Permanent(fmt.Errorf("%w: specversion %q", ErrDecode, v))
	}
	ev.SetID(get("id"))
	ev.SetType(get("type"))
	ev.SetSource(get("source"))
	if s := get("subject"); s != "" {
		ev.SetSubject(s)
	}
	if t := get("time"); t != "" {
		ts, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return ev, Permanent(fmt.Errorf("%w: time %q", ErrDecode, t))
		}
		ev.SetTime(ts)
	}
	for name, value := range lower {
		ext, ok := strings.CutPrefix(name, headerPrefix)
		if !ok || isCoreAttr(ext) {
			continue
		}
		ev.SetExtension(ext, value)
	}
	ct := lower[headerContentType]
	if ct == "" {
		ct = event.ApplicationJSON
	}
	ev.SetDataContentType(ct)
	ev.DataEncoded = data
	if err := validate(ev); err != nil {
		return ev, Permanent(fmt.Errorf("%w: %v", ErrDecode, err))
	}
	if checkJSON && ct == event.ApplicationJSON && !json.Valid(data) {
		return ev, Permanent(fmt.Errorf("%w: data is not JSON", ErrDecode))
	}
	return ev, nil
}

func isCoreAttr(name string) bool {
	switch name {
	case "specversion", "id", "type", "source", "time", "subject", "datacontenttype", "dataschema":
		return true
	}
	return false
}
