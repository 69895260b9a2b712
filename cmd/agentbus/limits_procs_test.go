package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills/demo"
)

// TestRateLimitAcrossTwoIngressProcesses: two ingress binaries, OS
// processes on one nats-server, share each tenant's request limit. A burst
// of inbound events spread over both admits exactly the limit; every other
// one is 429 rate_limited with a Retry-After within the minute; another
// tenant has its own limit.
func TestRateLimitAcrossTwoIngressProcesses(t *testing.T) {
	const limit = 5
	c := newCluster(t, demo.Config{}, "RATE_LIMIT_PER_MINUTE="+strconv.Itoa(limit), "TENANT_MAX_CONCURRENT_RUNS=1000")
	var urls []string
	for range 2 {
		p := c.start("ingress", "INGRESS_ADDR=127.0.0.1:0", "METRICS_ADDR=127.0.0.1:0")
		urls = append(urls, "http://"+listenAddr(t, p, "ingress listening"))
	}
	for _, u := range urls {
		eventually(t, 30*time.Second, "the ingress to answer", func() bool {
			resp, err := http.Get(u + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	post := func(url, tenant, path, body string) (int, http.Header, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant-Id", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(data, &out)
		return resp.StatusCode, resp.Header, out
	}
	for _, tenant := range []string{"acme", "globex"} {
		st, _, agent := post(urls[0], tenant, "/agent/agents", `{"name":"Support","system_prompt":"Help."}`)
		if st != http.StatusCreated {
			t.Fatalf("%s: create agent = %d %v", tenant, st, agent)
		}
		st, _, trig := post(urls[1], tenant, "/agent/triggers",
			fmt.Sprintf(`{"name":"all","agent_id":%q,"event_type":"message.new","conditions":{}}`, agent["agent_id"]))
		if st != http.StatusCreated {
			t.Fatalf("%s: create trigger = %d %v", tenant, st, trig)
		}
	}
	// Keep the burst inside one calendar minute: across a minute's turn
	// the sliding window counts the last minute's requests in part.
	if s := time.Now().Second(); s > 50 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	event := func(url, tenant string, i int) (int, http.Header, map[string]any) {
		return post(url, tenant, "/agent/events",
			fmt.Sprintf(`{"event_id":"burst-%d","event_type":"message.new","session_id":"s-%d","message":"hello %d"}`, i, i, i))
	}
	admitted, limited := map[int]int{}, 0
	for i := range 12 {
		st, h, body := event(urls[i%2], "acme", i)
		switch st {
		case http.StatusAccepted:
			admitted[i%2]++
		case http.StatusTooManyRequests:
			limited++
			code, _ := body["error"].(map[string]any)
			ra, err := strconv.Atoi(h.Get("Retry-After"))
			// One more fits once the burst's minute has mostly slid out.
			if code["code"] != "rate_limited" || err != nil || ra < 1 || ra > 60+60/limit+1 {
				t.Fatalf("event %d: 429 with code %v and Retry-After %q; want rate_limited within the sliding minute", i, code["code"], h.Get("Retry-After"))
			}
		default:
			t.Fatalf("event %d: status %d %v", i, st, body)
		}
	}
	if n := admitted[0] + admitted[1]; n != limit || limited != 12-limit || admitted[0] == 0 || admitted[1] == 0 {
		t.Fatalf("admitted %v (total %d), limited %d; want %d admitted across both processes", admitted, n, limited, limit)
	}
	// Another tenant's window is its own.
	if st, _, body := event(urls[1], "globex", 0); st != http.StatusAccepted {
		t.Fatalf("globex's first event: %d %v", st, body)
	}
}
