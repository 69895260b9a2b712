package main

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// sseEvent is one server-sent event: its id (the REPLY stream sequence)
// and chunk.
type sseEvent struct {
	id    uint64
	chunk runclient.Chunk
}

// readSSE reads events from resp until the result chunk, or until max
// events when max > 0; it returns them and whether the result came.
func readSSE(t *testing.T, resp *http.Response, max int) ([]sseEvent, bool) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var out []sseEvent
	var id uint64
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, _ = strconv.ParseUint(v, 10, 64)
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var c runclient.Chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		out = append(out, sseEvent{id: id, chunk: c})
		id = 0
		if c.EndOfDialog {
			return out, true
		}
		if max > 0 && len(out) == max {
			return out, false
		}
	}
	return out, false
}

// getStream opens GET /agent/runs/{id}/stream as tenant, after lastID.
func getStream(t *testing.T, base, tenant, runID, lastID string) *http.Response {
	t.Helper()
	var resp *http.Response
	eventually(t, 10*time.Second, "the run's stream", func() bool {
		req, _ := http.NewRequest(http.MethodGet, base+"/agent/runs/"+runID+"/stream", nil)
		req.Header.Set("X-Tenant-Id", tenant)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode == http.StatusNotFound { // the plan is not projected yet
			r.Body.Close()
			return false
		}
		resp = r
		return true
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %s", resp.Status)
	}
	return resp
}

// TestStreaming_ResumeWithLastEventIDLosesAndRepeatsNothing: a client
// that drops its SSE connection after a few chunks and reconnects with
// Last-Event-ID gets every remaining chunk exactly once, ending with the
// result: together, the two reads are the run's whole stream. Another
// tenant cannot read the stream.
func TestStreaming_ResumeWithLastEventIDLosesAndRepeatsNothing(t *testing.T) {
	s := startStack(t)
	base := "http://" + s.IngressAddr
	body, _ := json.Marshal(runclient.Request{TenantID: "demo", UserID: "u1", SessionID: "sess-resume",
		Message: "List the active outlets and rank them by engagement", Stream: true})
	resp, err := http.Post(base+"/agent/run", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	runID := resp.Header.Get("X-Run-Id")
	first, done := readSSE(t, resp, 3)
	resp.Body.Close() // the connection drops
	if done || len(first) != 3 || runID == "" {
		t.Fatalf("first read: %d chunks, done %v, run %q", len(first), done, runID)
	}
	if got := resp.Header.Get("X-Plan-Id"); got != orch.PlanID(runID) {
		t.Fatalf("X-Plan-Id %q, want the run's plan %s", got, orch.PlanID(runID))
	}
	last := first[len(first)-1].id
	again := getStream(t, base, "demo", runID, strconv.FormatUint(last, 10))
	if got := again.Header.Get("X-Plan-Id"); got != orch.PlanID(runID) {
		t.Fatalf("the resumed stream's X-Plan-Id %q, want %s", got, orch.PlanID(runID))
	}
	rest, done := readSSE(t, again, 0)
	if !done {
		t.Fatalf("the resumed stream did not end with the result (%d chunks)", len(rest))
	}
	whole, done := readSSE(t, getStream(t, base, "demo", runID, ""), 0)
	if !done {
		t.Fatal("the whole stream did not end with the result")
	}
	got := append(append([]sseEvent(nil), first...), rest...)
	if len(got) != len(whole) {
		t.Fatalf("first read %d + resumed %d chunks, the whole stream has %d", len(first), len(rest), len(whole))
	}
	seen := map[uint64]bool{}
	for i := range whole {
		if got[i].id == 0 || got[i].id != whole[i].id || got[i].chunk != whole[i].chunk {
			t.Fatalf("chunk %d: got %+v, want %+v", i, got[i], whole[i])
		}
		if seen[got[i].id] {
			t.Fatalf("chunk id %d repeated", got[i].id)
		}
		seen[got[i].id] = true
	}
	var kinds []string
	for _, e := range whole {
		kinds = append(kinds, e.chunk.MessageType)
	}
	joined := strings.Join(kinds, ",")
	if !strings.Contains(joined, "progress") || !strings.Contains(joined, "answer") || !strings.HasSuffix(joined, "result") {
		t.Fatalf("the stream holds %s: want progress, answer and the result last", joined)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/agent/runs/"+runID+"/stream", nil)
	req.Header.Set("X-Tenant-Id", "other")
	other, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	other.Body.Close()
	if other.StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant's GET of the stream: %s, want 404", other.Status)
	}
}
