package app

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/llm/provider"
)

// The forms of the text variables (Form): what a value must look like,
// and the check of each that is more than any text.

// text is any text, described as desc ("a file path").
func text(desc string) Form { return Form{Text: desc} }

// oneOf is one of values.
func oneOf(values ...string) Form {
	return Form{Text: "one of " + strings.Join(values, ", "), Check: func(s string) error {
		if !slices.Contains(values, s) {
			return errMalformed
		}
		return nil
	}}
}

// errMalformed is what a check returns; the ParseError built from it
// names the variable, the value and the form.
var errMalformed = errors.New("malformed")

var (
	// httpURL is an absolute http or https URL.
	httpURL = Form{Text: "an http(s) URL", Check: checkHTTPURL}
	// httpURLs are http(s) URLs separated by commas.
	httpURLs = Form{Text: "http(s) URLs separated by commas", Check: eachOf(checkHTTPURL)}
	// natsURLs are NATS server URLs, nats://host:port (the scheme may be
	// left out), separated by commas.
	natsURLs = Form{Text: "NATS URLs (nats://host:port) separated by commas", Check: eachOf(checkNATSURL)}
	// routes are cluster addresses, host:port or nats-route://host:port,
	// separated by commas.
	routes = Form{Text: "host:port or nats-route://host:port, separated by commas", Check: eachOf(checkNATSURL)}
	// addr is a listen address, host:port (the host may be empty).
	addr = Form{Text: "a host:port address", Check: checkAddr}
	// temperature is a sampling temperature.
	temperature = Form{Text: "a number from 0 to 2", Check: func(s string) error {
		t, err := strconv.ParseFloat(s, 64)
		if err != nil || t < 0 || t > 2 {
			return errMalformed
		}
		return nil
	}}
	// modelSpec names a provider and its model.
	modelSpec = Form{Text: "offline, openai:<model>, anthropic:<model> or bedrock:<model>", Check: func(s string) error {
		_, _, err := provider.Parse(s)
		return err
	}}
	// embedderSpec names the memory embedder.
	embedderSpec = Form{Text: "offline or openai:<model>", Check: func(s string) error {
		name, _, err := provider.Parse(s)
		if err != nil || (name != provider.Offline && name != provider.OpenAI) {
			return errMalformed
		}
		return nil
	}}
	// aliasPairs are name=model-id pairs separated by commas.
	aliasPairs = Form{Text: "name=model-id pairs separated by commas", Check: func(s string) error {
		_, err := parseAliases(s)
		return err
	}}
	// commandLine is a command and its arguments.
	commandLine = Form{Text: "words separated by spaces, or a JSON array of strings", Check: func(s string) error {
		_, err := splitCommand(s)
		return err
	}}
	// logLevel is a zerolog level.
	logLevel = Form{Text: "a log level: debug, info, warn or error (also trace, fatal, panic, disabled)", Check: func(s string) error {
		_, err := zerolog.ParseLevel(s)
		return err
	}}
	// egressList is an egress allow-list (egress.Parse).
	egressList = Form{Text: "host names, IP addresses or CIDR prefixes separated by commas", Check: func(s string) error {
		_, err := egress.Parse(s)
		return err
	}}
	// jsonObject is a JSON object.
	jsonObject = Form{Text: "a JSON object", Check: func(s string) error {
		var m map[string]any
		return json.Unmarshal([]byte(s), &m)
	}}
)

// eachOf checks every comma-separated element of a list with check; the
// list must name at least one.
func eachOf(check func(string) error) func(string) error {
	return func(s string) error {
		n := 0
		for e := range strings.SplitSeq(s, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			if err := check(e); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			return errMalformed
		}
		return nil
	}
}

func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errMalformed
	}
	return nil
}

// checkNATSURL accepts a URL with a host, or host:port without a scheme
// (which nats.go and nats-server complete).
func checkNATSURL(s string) error {
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return errMalformed
	}
	return nil
}

func checkAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil || port == "" {
		return errMalformed
	}
	return nil
}

// parseAliases parses MODEL_ALIASES: name=model-id pairs separated by
// commas.
func parseAliases(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		name, id, ok := strings.Cut(strings.TrimSpace(pair), "=")
		name, id = strings.TrimSpace(name), strings.TrimSpace(id)
		if !ok || name == "" || id == "" {
			return nil, fmt.Errorf("MODEL_ALIASES %q: each entry must be name=model-id", pair)
		}
		out[name] = id
	}
	return out, nil
}
