package events

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LastValues reads the current values of keys of a KV bucket with one
// request (a batched direct get of the bucket's last message per key,
// nats-server 2.11+): one round trip however many keys. A key with no
// value (never written, deleted or purged) is absent from the result.
// It waits at most CallTimeout for the server's answer, whatever ctx's
// deadline, as every call a hop makes does.
func LastValues(ctx context.Context, js jetstream.JetStream, bucket string, keys []string) (map[string][]byte, error) {
	entries, err := LastEntries(ctx, js, bucket, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(entries))
	for k, e := range entries {
		out[k] = e.Value
	}
	return out, nil
}

// KVValue is a key's current value and its revision.
type KVValue struct {
	Value    []byte
	Revision uint64
}

// LastEntries is LastValues with each value's revision. A key may be a
// filter with wildcards ("tenant.>"): every key it matches is read, up
// to the server's limit of one batch (1024 keys; more fails the call).
func LastEntries(ctx context.Context, js jetstream.JetStream, bucket string, keys []string) (map[string]KVValue, error) {
	prefix := "$KV." + bucket + "."
	subjects := make([]string, len(keys))
	for i, k := range keys {
		subjects[i] = prefix + k
	}
	msgs, err := lastMsgs(ctx, js, "KV_"+bucket, subjects)
	if err != nil {
		return nil, err
	}
	out := make(map[string]KVValue, len(msgs))
	for _, m := range msgs {
		if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			continue
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("events: batched read of %s: sequence of %s: %w", bucket, m.Header.Get(jetstream.SubjectHeader), err)
		}
		out[strings.TrimPrefix(m.Header.Get(jetstream.SubjectHeader), prefix)] = KVValue{Value: m.Data, Revision: seq}
	}
	return out, nil
}

// maxDirectBatch is the most messages nats-server answers one batched
// direct get with; past it the request fails (413).
const maxDirectBatch = 1024

// lastMsgs reads the last message of each subject of subjects (each may
// be a filter with wildcards) from stream with one batched direct get
// (nats-server 2.11+), in the order the server sends them. Its replies go
// to a channel sized for the most the server can send (a message per
// subject without wildcards, else maxDirectBatch, and the end of the
// batch), so none can be dropped. A synchronous subscription would
// allocate its default queue of 65,536 messages (512 KiB) for every
// read: it was the largest allocation of a run (two reads at its start).
func lastMsgs(ctx context.Context, js jetstream.JetStream, stream string, subjects []string) ([]*nats.Msg, error) {
	return lastMsgsWithin(ctx, js, stream, subjects, CallTimeout)
}

// lastMsgsWithin is lastMsgs waiting at most within for the replies,
// however long ctx lasts: a hop's context lasts minutes (its handling
// deadline), and a read in flight when the node serving it dies gets no
// reply at all: without a bound of its own it held the hop, and the run,
// until that deadline. lastMsgs bounds it by CallTimeout.
func lastMsgsWithin(ctx context.Context, js jetstream.JetStream, stream string, subjects []string, within time.Duration) ([]*nats.Msg, error) {
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{subjects})
	if err != nil {
		return nil, err
	}
	size := len(subjects)
	for _, s := range subjects {
		if strings.ContainsAny(s, "*>") {
			size = maxDirectBatch
			break
		}
	}
	nc := js.Conn()
	replies := make(chan *nats.Msg, size+2) // and the end of the batch, or a status
	// An inbox of its own: one under the connection's request mux
	// (NewRespInbox) would have every reply delivered to the mux too.
	inbox := nc.NewInbox()
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return nil, fmt.Errorf("events: batched read of %s: %w", stream, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(apiSubject(js, "DIRECT.GET."+stream), inbox, req); err != nil {
		return nil, fmt.Errorf("events: batched read of %s: %w", stream, err)
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var out []*nats.Msg
	for {
		select {
		case m := <-replies:
			if m.Header.Get(jetstream.SubjectHeader) != "" {
				out = append(out, m)
				continue
			}
			switch status := m.Header.Get("Status"); status {
			case "204": // the end of the batch
				return out, nil
			case "404": // nothing stored under the subjects
				return nil, nil
			default:
				return nil, fmt.Errorf("events: batched read of %s: status %s %s", stream, status, m.Header.Get("Description"))
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("events: batched read of %s: %w", stream, ctx.Err())
		}
	}
}

// apiSubject is the JetStream API subject of js for subject.
func apiSubject(js jetstream.JetStream, subject string) string {
	switch o := js.Options(); {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "." + subject
	case o.Domain != "":
		return "$JS." + o.Domain + ".API." + subject
	}
	return "$JS.API." + subject
}
