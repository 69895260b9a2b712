package main

import (
	"context"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// TestA2APythonSDK: the official a2a-sdk Python package, unmodified
// (deploy/pyclients/setup.sh installs it), against two all-in-ones: it
// fetches the default agent's card, sends the demo task and waits for its
// task, streams one to its end (progress as working status-updates, the
// answer as artifact-updates, a final status-update) and reads it with
// tasks/get; on a stack whose tool calls wait at a gate, a streamed task
// ends input-required, a reply "approve" to it resumes the same task to
// completed, and another parked task is cancelled (then TaskNotCancelable);
// a missing task and another tenant's are TaskNotFound.
func TestA2APythonSDK(t *testing.T) {
	python := pyclients(t)
	s := startStack(t)
	gs, _ := startStackWith(t, networkOutlets)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := runPython(t, ctx, nil, python, "a2a_sdk_check.py", "http://"+s.IngressAddr, "http://"+gs.IngressAddr, "demo", demoTask)
	type stream struct {
		Kinds    []string `json:"kinds"`
		Progress string   `json:"progress"`
		Final    bool     `json:"final"`
		State    string   `json:"state"`
		Answer   string   `json:"answer"`
		Message  string   `json:"message"`
		SameTask bool     `json:"same_task"`
	}
	type rpcError struct {
		Code int `json:"code"`
	}
	var got struct {
		Card struct {
			Name      string   `json:"name"`
			URL       string   `json:"url"`
			RootURL   string   `json:"root_url"`
			Streaming bool     `json:"streaming"`
			Schemes   []string `json:"schemes"`
			Protocol  string   `json:"protocol"`
		} `json:"card"`
		Send struct {
			State   string `json:"state"`
			Answer  string `json:"answer"`
			ID      string `json:"id"`
			Context string `json:"context"`
		} `json:"send"`
		Stream  stream `json:"stream"`
		Gate    stream `json:"gate"`
		Resumed stream `json:"resumed"`
		Get     struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"get"`
		Cancel struct {
			Before string    `json:"before"`
			State  string    `json:"state"`
			Again  *rpcError `json:"again"`
		} `json:"cancel"`
		Missing     *rpcError `json:"missing"`
		OtherTenant *rpcError `json:"other_tenant"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c := got.Card
	if c.URL != "http://"+s.IngressAddr+"/a2a" || c.RootURL != c.URL || !c.Streaming || len(c.Schemes) != 1 || c.Schemes[0] != "bearer" ||
		c.Protocol != "0.3.0" {
		t.Errorf("card %+v", c)
	}
	want := expectedRanking(t, s.SkillsURL, "demo")
	if got.Send.State != "completed" || got.Send.ID == "" || !strings.HasPrefix(got.Send.Context, "a2a-") {
		t.Errorf("message/send: %+v", got.Send)
	}
	assertRanked(t, got.Send.Answer, want)
	st := got.Stream
	if st.State != "completed" || !st.Final || len(st.Kinds) < 3 || st.Kinds[0] != "task" ||
		!strings.Contains(strings.Join(st.Kinds, " "), "artifact-update") || !strings.Contains(st.Progress, "step_1 started") {
		t.Errorf("message/stream: %+v", st)
	}
	assertRanked(t, st.Answer, want)
	if got.Get.ID == "" || got.Get.State == "" {
		t.Errorf("tasks/get: %+v", got.Get)
	}
	if g := got.Gate; g.State != "input-required" || !g.Final || !strings.Contains(g.Message, "outlet_list (network)") ||
		!strings.Contains(g.Message, `Reply to this task with "approve" or "deny"`) {
		t.Errorf("the gated task: %+v", g)
	}
	if r := got.Resumed; r.State != "completed" || !r.Final || !r.SameTask {
		t.Errorf("the reply's task: %+v", r)
	}
	assertRanked(t, got.Resumed.Answer, want)
	if cn := got.Cancel; cn.Before != "input-required" || cn.State != "canceled" || cn.Again == nil || cn.Again.Code != -32002 {
		t.Errorf("tasks/cancel: %+v", cn)
	}
	if got.Missing == nil || got.Missing.Code != -32001 || got.OtherTenant == nil || got.OtherTenant.Code != -32001 {
		t.Errorf("a missing task %+v, another tenant's %+v: want TaskNotFound", got.Missing, got.OtherTenant)
	}
}
