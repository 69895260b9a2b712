package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/cmd/internal/procs"
	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tools"
)

// TestPerRolePermissions runs every role process and the ingress on a real
// nats-server with one user each, allowed only what its roles'
// declarations derive: a full run succeeds, with no permissions violation
// logged, and the server refuses an executor's forged group.joined or
// run.finished and an ingress's consumer on the AUDIT stream.
func TestPerRolePermissions(t *testing.T) {
	ns, passwords := permissionedServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	if _, err := nats.Connect(ns.ClientURL()); err == nil {
		t.Fatal("the server admitted a connection without credentials")
	}
	conf := func(user string) *app.Config {
		c := app.DefaultConfig()
		c.NATSURL, c.NATSUser, c.NATSPassword = ns.ClientURL(), user, passwords[user]
		c.AckWait, c.Store, c.StorePrefix = 2*time.Second, "embedded", ""
		return c
	}
	admin, err := connectAs(ns.ClientURL(), app.UserAdmin, passwords[app.UserAdmin], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	if err := app.Setup(ctx, ajs, conf(app.UserAdmin)); err != nil {
		t.Fatal(err)
	}

	skillSrv := httptest.NewServer(demo.NewService(demo.Config{}).Handler())
	defer skillSrv.Close()
	var logs procs.Buffer
	log := zerolog.New(&logs).Level(zerolog.InfoLevel)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, p := range app.Processes {
		c := conf(p.Name)
		c.SkillServiceURL = skillSrv.URL + "/tenants/{tenant}/mcp"
		d, err := app.Connect(ctx, p.Name, c, log.With().Str("process", p.Name).Logger())
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		wg.Go(func() {
			defer d.Close()
			if err := d.RunRoles(runCtx, p.Roles...); err != nil && runCtx.Err() == nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		})
	}
	ic := conf(app.UserIngress)
	ic.SkillServiceURL = skillSrv.URL + "/tenants/{tenant}/mcp"
	ingressConn, err := app.Connect(ctx, app.UserIngress, ic, log.With().Str("process", "ingress").Logger())
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	wg.Go(func() {
		defer ingressConn.Close()
		err := app.ServeIngress(runCtx, ingressConn, app.IngressOptions{Addr: "127.0.0.1:0", RunTimeout: time.Minute},
			func(a string) { addr <- a })
		if err != nil && runCtx.Err() == nil {
			t.Errorf("ingress: %v", err)
		}
	})
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case <-ctx.Done():
		t.Fatal("the ingress did not start")
	}

	res := postRun(t, url, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-perms", Message: demoTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}
	// The projector writes the run's execution record with its own
	// credentials, and the ingress reads it with its own.
	eventually(t, 10*time.Second, "the run's execution record", func() bool {
		var list ingress.ExecutionList
		getJSON(t, url+"/agent/executions?session_id=s-perms", "demo", &list)
		return len(list.Executions) == 1 && list.Executions[0].ExecutionID == res.RunID &&
			list.Executions[0].Status == "success" && len(list.Executions[0].ToolCalls) > 0 && list.Executions[0].TokensIn > 0
	})
	// An operator hands the session to a human: the ingress records it
	// with its own credentials (the session's audit events), the
	// projector puts it in the operators' queue, new runs are refused,
	// and a reply resumes the session.
	post(t, url+"/agent/sessions/s-perms/handoff", "demo", `{"target_type":"human","reason":"complaint","by":"op-1"}`, http.StatusOK)
	post(t, url+"/agent/run", "demo", `{"user_id":"u","session_id":"s-perms","message":"hello?"}`, http.StatusConflict)
	queued := func(status string) func() bool {
		return func() bool {
			var list ingress.SessionList
			getJSON(t, url+"/agent/sessions?status="+status, "demo", &list)
			return len(list.Sessions) == 1 && list.Sessions[0].SessionID == "s-perms"
		}
	}
	eventually(t, 10*time.Second, "the handed-off session in the operators' queue", queued("handed_off"))
	post(t, url+"/agent/sessions/s-perms/reply", "demo", `{"message":"Refunded.","by":"op-1"}`, http.StatusOK)
	eventually(t, 10*time.Second, "the session active again", queued("active"))
	// An inbound event on agent.inbound.demo: the ingress consumes it,
	// records its evaluation (trigger.evaluated, indexed by the
	// projector) and starts the run; a malformed one it dead-letters.
	analyst := createAgent(t, url, "demo", `{"name":"Analyst","system_prompt":"Rank outlets.","tools":["outlet_list","engagement_analytics"]}`)
	post(t, url+"/agent/triggers", "demo", `{"name":"Ranking","agent_id":"`+analyst+`","event_type":"message.new",
		"conditions":{"any":[{"field":"message.text","operator":"contains","value":"rank"}]}}`, http.StatusCreated)
	if _, err := ajs.Publish(ctx, "agent.inbound.demo", []byte(`{"event_id":"perm-bad","event_type":"message.new","session_id":"s","x":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ajs.Publish(ctx, "agent.inbound.demo", []byte(`{"event_id":"perm-1","event_type":"message.new","user_id":"u",
		"session_id":"s-perms-in","data":{"message":{"text":"`+demoTask+`"}}}`)); err != nil {
		t.Fatal(err)
	}
	evs := waitEvaluations(t, url, "demo", "perm-1", 1)
	if evs[0].Outcome != ingress.OutcomeStarted || evs[0].AgentID != analyst {
		t.Fatalf("perm-1's evaluation %+v", evs[0])
	}
	eventually(t, 20*time.Second, "the inbound event's run", func() bool {
		plan, _, err := ingressConn.Store.GetPlan(ctx, "demo", evs[0].PlanID)
		return err == nil && plan.Status == store.PlanStatusComplete
	})
	// The run answered its conversation, on the router's credentials.
	stream, err := ajs.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := stream.GetLastMsgForSubject(ctx, tools.OutboundSubject("demo"))
	var answer tools.OutboundMessage
	if err != nil || json.Unmarshal(sent.Data, &answer) != nil || answer.RunID != evs[0].RunID || answer.Text == "" {
		t.Fatalf("the inbound event's answer on %s: %+v, %v", tools.OutboundSubject("demo"), answer, err)
	}
	if dl := deadLetters(t, ctx, ajs, 1)[0]; !strings.Contains(dl.Reason, "unknown field") || dl.Deliveries != 1 {
		t.Fatalf("dead letter %+v", dl)
	}
	if l := logs.String(); strings.Contains(strings.ToLower(l), "permissions violation") {
		t.Fatalf("a role needed more than its permissions:\n%s", l)
	}

	// The executor's credentials: it may finish a step, never join a
	// group of several or finish a run.
	violations := make(chan error, 8)
	exec, err := connectAs(ns.ClientURL(), "executor", passwords["executor"], violations)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Close()
	ejs, _ := jetstream.New(exec)
	forged, _ := json.Marshal(orch.GroupJoined{})
	for _, subject := range []string{"agent.group.joined.demo", "agent.run.finished.demo"} {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := ejs.Publish(pctx, subject, forged)
		cancel()
		if err == nil {
			t.Fatalf("the server stored the executor's %s", subject)
		}
		select {
		case v := <-violations:
			if !strings.Contains(v.Error(), "Permissions Violation for Publish to \""+subject+"\"") {
				t.Errorf("publish of %s: %v", subject, v)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("no permissions violation for the executor's %s", subject)
		}
	}
	// A malformed step.finished is the executor's to publish: the
	// aggregator dead-letters it, with its own credentials.
	if _, err := ejs.Publish(ctx, "agent.step.finished.demo", []byte(`{}`)); err != nil {
		t.Fatalf("the executor may not publish step.finished: %v", err)
	}
	// It keeps skill results' attachments in the artifacts object store:
	// it may store, replace (purging the old chunks) and read objects.
	octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
	defer ocancel()
	arts, err := handlers.NewAttachments(octx, ejs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := arts.Put(octx, "demo", skills.Attachment{Kind: "image", MimeType: "image/png"}, []byte("png")); err != nil {
		t.Fatalf("the executor may not store an attachment: %v", err)
	}
	eobs, err := ejs.ObjectStore(octx, handlers.BucketArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"first", "second"} {
		if _, err := eobs.PutString(octx, "demo/replaced", v); err != nil {
			t.Fatalf("the executor may not replace an object: %v", err)
		}
	}
	if got, err := eobs.GetString(octx, "demo/replaced"); err != nil || got != "second" {
		t.Fatalf("the executor reads %q, %v", got, err)
	}
	select {
	case v := <-violations:
		t.Fatalf("the executor on the artifacts object store: %v", v)
	default:
	}
	agent, err := ajs.Stream(ctx, events.StreamAgent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	eventually(t, 10*time.Second, "the dead letter of the malformed step.finished", func() bool {
		_, err := agent.GetLastMsgForSubject(ctx, events.DeadSubject("demo"))
		return err == nil
	})

	// The ingress cannot read the AUDIT stream.
	ing, err := connectAs(ns.ClientURL(), app.UserIngress, passwords[app.UserIngress], violations)
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Close()
	ijs, _ := jetstream.New(ing)
	// It serves the artifacts' data, and cannot store any.
	iarts, err := handlers.NewAttachments(octx, ijs)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = iarts.Open(octx, "demo", "29ae6fb3c1d9f7f5c1b8a7c5d2a5b0e1f3b4d5c6e7f8091a2b3c4d5e6f708192")
	if !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("an unknown artifact: %v", err)
	}
	sum := sha256.Sum256([]byte("png"))
	obj, typ, err := iarts.Open(octx, "demo", hex.EncodeToString(sum[:]))
	if err != nil || typ != "image/png" {
		t.Fatalf("the ingress may not read an artifact: %s, %v", typ, err)
	}
	_ = obj.Close()
	select {
	case v := <-violations:
		t.Fatalf("the ingress on the artifacts object store: %v", v)
	default:
	}
	if _, err := iarts.Put(octx, "demo", skills.Attachment{Kind: "image"}, []byte("forged")); err == nil {
		t.Fatal("the ingress stored an artifact")
	}
	select { // the refused publish's violation, so that none is left for later checks
	case <-violations:
	case <-time.After(5 * time.Second):
	}
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	defer ccancel()
	// The executors' idempotency records are no business of the ingress.
	if _, err := ijs.OrderedConsumer(cctx, "KV_"+handlers.BucketToolcalls, jetstream.OrderedConsumerConfig{}); err == nil {
		t.Fatal("the ingress created a consumer on the toolcalls bucket")
	} else if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") &&
		!strings.Contains(err.Error(), "ermission") {
		t.Errorf("consumer on the toolcalls bucket refused with %v", err)
	}
}

// permissionedServer runs a nats-server with one user per role process,
// the ingress and admin (agentbus nats --permissions) until the test ends,
// and returns it with the users' passwords.
func permissionedServer(t *testing.T) (*server.Server, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	passwords, err := app.LoadPasswords(filepath.Join(dir, "users.json"))
	if err != nil {
		t.Fatal(err)
	}
	users, err := app.ServerUsers(passwords, "")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := events.RunServer(events.ServerConfig{Port: -1, StoreDir: filepath.Join(dir, "nats"), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns, passwords
}

// connectAs connects as user, sending asynchronous errors (permissions
// violations) to errs when set.
func connectAs(url, user, password string, errs chan<- error) (*nats.Conn, error) {
	return nats.Connect(url, nats.UserInfo(user, password), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errs != nil {
			select {
			case errs <- err:
			default:
			}
		}
	}))
}
