package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

func run(args []string) int {
	fs := flag.NewFlagSet("agentbus run", flag.ExitOnError)
	url := ingressURL(fs)
	tenant := fs.String("tenant", "demo", "tenant id")
	user := fs.String("user", "cli-user", "user id")
	session := fs.String("session", "", "session id (default: a new one)")
	stream := fs.Bool("stream", true, "render progress and the answer live as the run streams them (resuming after a dropped connection); --stream=false waits for the whole answer")
	budget := fs.String("budget", "", "the run's own limits, within the tenant's caps: dimension=value pairs, comma-separated, e.g. tool_calls=10,cost_usd=0.5")
	agent := fs.String("agent", "", "the id of the tenant's agent the run acts as (POST /agent/agents): its instructions, tools and limits")
	credential := app.EnvKey.Value() // a tenant API key or JWT; from the environment only, never a flag
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentbus run [flags] \"<task>\"\n\nAGENTBUS_KEY, when set, is sent as the bearer credential (a tenant API key or JWT).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	app.ParseFlags(fs, args)
	task := strings.Join(fs.Args(), " ")
	if task == "" {
		fs.Usage()
		return 2
	}
	if *session == "" {
		*session = fmt.Sprintf("sess-%d", time.Now().UnixNano())
	}
	var res orch.RunResult
	var err error
	p := &printer{progress: func(c runclient.Chunk) { fmt.Println("  ·", c.Content) }}
	started := func(runID string) { fmt.Printf("run %s (agentbus cancel --tenant %s %s)\n", runID, *tenant, runID) }
	client := runclient.NewHTTP(*url, nil).WithCredential(credential).OnStart(started)
	req := orch.RunRequest{TenantID: *tenant, UserID: *user, SessionID: *session, Message: task, AgentID: *agent}
	if req.Budget, err = parseBudget(*budget); err != nil {
		fmt.Fprintln(os.Stderr, "agentbus run: --budget:", err)
		return 2
	}
	if *stream {
		res, err = client.Stream(context.Background(), req, p.chunk)
	} else {
		res, err = client.Run(context.Background(), req)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbus run:", err)
		return 1
	}
	return report(res, *tenant)
}

// report prints a run's result (or the gate it waits at) and returns the
// command's exit code: 0 for SUCCESS, 3 for a run waiting at a gate, 1
// otherwise.
func report(res orch.RunResult, tenant string) int {
	if runclient.Parked(res) {
		fmt.Printf("\n%s\n", res.Response)
		var g orch.GatePacket
		_ = json.Unmarshal(res.Detail, &g)
		switch g.Kind {
		case orch.GateInterrupt:
			fmt.Printf("\nresume it:  agentbus resume --tenant %s %s\n", tenant, res.RunID)
		case orch.GateElicitation:
			fmt.Printf("\nanswer it:  agentbus approve --tenant %s --content '{...}' %s %s   (--deny to refuse)\n", tenant, res.RunID, g.Gate)
		case orch.GateClarify:
			fmt.Printf("\nanswer it:  agentbus approve --tenant %s --answer \"...\" %s %s   (--deny to decline)\n", tenant, res.RunID, g.Gate)
			fmt.Printf("       or:  agentbus run --tenant %s --session %s \"...\"   (the session's next message)\n", tenant, res.SessionID)
		case orch.GateBudget:
			dim := orch.DimToolCalls
			if g.Budget != nil && g.Budget.Dimension != "" {
				dim = g.Budget.Dimension
			}
			fmt.Printf("\nextend it:  agentbus approve --tenant %s --extend %s=10 %s %s   (--deny to refuse)\n", tenant, dim, res.RunID, g.Gate)
		default:
			fmt.Printf("\ndecide it:  agentbus approve --tenant %s %s %s   (--deny to refuse)\n", tenant, res.RunID, g.Gate)
		}
		return 3
	}
	fmt.Printf("\n%s\n", res.Response)
	fmt.Printf("\nplan %s · %s · %s · %s\n", res.PlanID, res.Status, res.TerminalCode, usageLine(res.Usage))
	if res.TerminalCode != orch.CodeSuccess {
		return 1
	}
	return 0
}

// control runs the run-control commands: approve, interrupt, resume and
// steer. approve (and resume) then follow the run to its end, or to its
// next gate.
func control(action string) func([]string) int {
	return func(args []string) int {
		fs := flag.NewFlagSet("agentbus "+action, flag.ExitOnError)
		url := ingressURL(fs)
		tenant := fs.String("tenant", "demo", "tenant id (a tenant credential names its own)")
		user := fs.String("user", "cli-user", "who you are: the approver an approval records (a user credential names its own)")
		deny := fs.Bool("deny", false, "approve: deny the gate instead")
		comment := fs.String("comment", "", "approve: a comment recorded with the decision")
		content := fs.String("content", "", "approve: the answer (a JSON object) to the question of an elicitation gate")
		answer := fs.String("answer", "", "approve: the answer (text) to the question of a clarify gate")
		extend := fs.String("extend", "", "approve: the extension of a budget gate, dimension=amount pairs added to the run's limits (within the tenant's caps), e.g. tool_calls=10")
		follow := fs.Bool("follow", true, "approve, resume: follow the run until it ends or waits again")
		usage := map[string]string{"approve": "<run_id> <gate_id>", "interrupt": "<run_id>", "resume": "<run_id>",
			"steer": "<run_id> \"<message>\""}
		fs.Usage = func() {
			fmt.Fprintf(fs.Output(), "Usage: agentbus %s [flags] %s\n\nAGENTBUS_KEY, when set, is sent as the bearer credential (a tenant API key or JWT).\n\nFlags:\n", action, usage[action])
			fs.PrintDefaults()
		}
		app.ParseFlags(fs, args)
		want := map[string]int{"approve": 2, "interrupt": 1, "resume": 1, "steer": 2}[action]
		if fs.NArg() < want || action != "steer" && fs.NArg() != want {
			fs.Usage()
			return 2
		}
		runID := fs.Arg(0)
		hc := &http.Client{Transport: userHeader{user: *user}}
		client := runclient.NewHTTP(*url, hc).WithCredential(app.EnvKey.Value())
		var body any
		path := action
		switch action {
		case "approve":
			decision := "approve"
			if *deny {
				decision = "deny"
			}
			if *content != "" && !json.Valid([]byte(*content)) {
				fmt.Fprintln(os.Stderr, "agentbus approve: --content is not valid JSON")
				return 2
			}
			req := runclient.ApprovalRequest{Decision: decision, Comment: *comment, Content: json.RawMessage(*content)}
			if *answer != "" {
				if *content != "" {
					fmt.Fprintln(os.Stderr, "agentbus approve: give --answer or --content, not both")
					return 2
				}
				req.Content, _ = json.Marshal(*answer)
			}
			ext, err := parseBudget(*extend)
			if err != nil {
				fmt.Fprintln(os.Stderr, "agentbus approve: --extend:", err)
				return 2
			}
			req.Extend = ext
			path, body = "approvals/"+fs.Arg(1), req
		case "steer":
			body = runclient.SteerRequest{Message: strings.Join(fs.Args()[1:], " ")}
		}
		res, err := client.Control(context.Background(), *tenant, runID, path, body)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agentbus %s: %v\n", action, err)
			return 1
		}
		fmt.Printf("run %s (plan %s): %s", res.RunID, res.PlanID, res.Status)
		if res.By != "" {
			fmt.Printf(" by %s", res.By)
		}
		fmt.Println()
		if !*follow || action == "interrupt" || action == "steer" || *deny {
			return 0
		}
		p := &printer{progress: func(c runclient.Chunk) { fmt.Println("  ·", c.Content) }}
		out, err := client.Follow(context.Background(), *tenant, runID, p.chunk)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agentbus %s: follow: %v\n", action, err)
			return 1
		}
		return report(out, *tenant)
	}
}

// userHeader sends X-User-Id: who the caller is, on an ingress whose
// credential does not name a user.
type userHeader struct{ user string }

func (u userHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-User-Id", u.user)
	return http.DefaultTransport.RoundTrip(r)
}

// parseBudget reads dimension=value pairs ("tool_calls=10,cost_usd=0.5").
func parseBudget(s string) (orch.Vector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	v := orch.Vector{}
	for _, pair := range strings.Split(s, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%q is not dimension=number", pair)
		}
		v[orch.Dim(strings.TrimSpace(k))] = x
	}
	return v, v.Validate()
}

// ingressURL registers --url, the ingress's URL (env AGENTBUS_URL), on fs.
func ingressURL(fs *flag.FlagSet) *string {
	var url string
	app.EnvURL.Bind(fs, &url)
	return &url
}

func cancelRun(args []string) int {
	fs := flag.NewFlagSet("agentbus cancel", flag.ExitOnError)
	url := ingressURL(fs)
	tenant := fs.String("tenant", "demo", "tenant id (a tenant credential names its own)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentbus cancel [flags] <run_id>\n\nAGENTBUS_KEY, when set, is sent as the bearer credential (a tenant API key or JWT).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	app.ParseFlags(fs, args)
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	res, err := runclient.NewHTTP(*url, nil).WithCredential(app.EnvKey.Value()).Cancel(context.Background(), *tenant, fs.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbus cancel:", err)
		return 1
	}
	fmt.Printf("run %s (plan %s): %s\n", res.RunID, res.PlanID, res.Status)
	return 0
}
