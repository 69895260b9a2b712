package opensearch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	osgo "github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/signer/awsv2"

	"github.com/agentbus/agentbus/store"
)

// Defaults applied by Config when a field is zero.
const (
	// DefaultURL is the node used when Config.URLs is empty: the local
	// development node started by deploy/opensearch/run.sh.
	DefaultURL = "http://127.0.0.1:9200"
	// DefaultDimension is the default length of agent_memory embeddings
	// (OpenAI text-embedding-3-small).
	DefaultDimension = 1536
	// DefaultEventRetention is how long agent_events are kept when the ISM
	// retention policy is installed.
	DefaultEventRetention = store.DefaultEventRetention
	// DefaultTimeout bounds every call of the Store, retries included.
	DefaultTimeout = 30 * time.Second
)

// ISMMode says what New does about the Index State Management retention
// policy of agent_events.
type ISMMode string

// ISM modes.
const (
	// ISMAuto (the default) installs the policy when the cluster has the
	// ISM plugin and goes without retention otherwise; Store.ISMEnabled
	// reports which.
	ISMAuto ISMMode = ""
	// ISMRequired makes New fail with ErrISMUnavailable when the cluster
	// has no ISM plugin.
	ISMRequired ISMMode = "required"
	// ISMDisabled never touches ISM (for example on Amazon OpenSearch
	// Serverless, which has no ISM).
	ISMDisabled ISMMode = "disabled"
)

// Engines accepted by Config.Engine.
const (
	// EngineLucene is the default k-NN engine: pure Java, shipped with the
	// k-NN plugin, efficient filtering, cosine similarity.
	EngineLucene = "lucene"
	// EngineFaiss needs the k-NN plugin's native libraries.
	EngineFaiss = "faiss"
)

// Config configures New. The zero value is valid: the local development
// node (DefaultURL) with the defaults documented on each field. Validate
// reports every invalid field at once.
type Config struct {
	// URLs of the cluster's nodes; default [DefaultURL].
	URLs []string
	// Username and Password enable HTTP basic authentication.
	Username string
	Password string
	// CAFile is a PEM file of the certificate authorities trusted for
	// https URLs; it replaces the system pool.
	CAFile string
	// InsecureSkipVerify disables TLS certificate verification (development
	// only).
	InsecureSkipVerify bool
	// AWS, when set, signs every request with AWS SigV4 using the default
	// AWS credential chain (environment, shared config, IMDS, ...).
	AWS *AWSConfig

	// IndexPrefix is prepended to every index, template and policy name,
	// so several deployments (or test runs) can share a cluster: "test1_"
	// gives "test1_agent_memory". Lower case letters, digits, '_' and '-'
	// only; it must not start with '_' or '-'.
	IndexPrefix string
	// Dimension is the dimension of agent_memory's knn_vector field;
	// default DefaultDimension. Every stored embedding must have it.
	Dimension int
	// Engine is the k-NN engine of the embedding field: EngineLucene (the
	// default) or EngineFaiss. nmslib is refused by OpenSearch 3.
	Engine string
	// Shards is the number of primary shards of each index; default 1.
	Shards int
	// Replicas is the number of replicas of each index. 0 (the default)
	// means auto_expand_replicas 0-1: no replica on a single node (green),
	// one as soon as there is a second data node.
	Replicas int
	// RefreshInterval sets index.refresh_interval; 0 keeps OpenSearch's
	// default (1s). Writes wait for the next refresh (refresh=wait_for), so
	// a shorter interval makes them return sooner at some indexing cost.
	RefreshInterval time.Duration

	// ISM chooses how the agent_events retention policy is handled.
	ISM ISMMode
	// EventRetention is how long agent_events indices are kept after they
	// roll over (daily); default DefaultEventRetention.
	EventRetention time.Duration

	// ExecutionTTL is how long execution records (agent_executions) are
	// kept; default store.DefaultExecutionTTL. With ISM a day's index is
	// deleted ExecutionTTL + 1 day after it was created; reads never
	// return a record older than ExecutionTTL.
	ExecutionTTL time.Duration

	// Timeout bounds every Store call; default DefaultTimeout.
	Timeout time.Duration
	// Transport, when set, replaces the HTTP transport (tests, proxies).
	// CAFile and InsecureSkipVerify then apply only if it is an
	// *http.Transport.
	Transport http.RoundTripper
}

// String describes cfg for logs, with the password redacted.
func (cfg Config) String() string {
	type plain Config // no String method: no recursion
	c := plain(cfg)
	if c.Password != "" {
		c.Password = "REDACTED"
	}
	return fmt.Sprintf("%+v", c)
}

// AWSConfig enables AWS SigV4 request signing.
type AWSConfig struct {
	// Region is the AWS region of the domain or collection, for example
	// "eu-west-1". Required.
	Region string
	// Service is "es" (Amazon OpenSearch Service, the default) or "aoss"
	// (OpenSearch Serverless; see the package documentation for what it
	// does not support).
	Service string
}

// withDefaults returns cfg with its zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	if len(cfg.URLs) == 0 {
		cfg.URLs = []string{DefaultURL}
	}
	if cfg.Dimension == 0 {
		cfg.Dimension = DefaultDimension
	}
	if cfg.Engine == "" {
		cfg.Engine = EngineLucene
	}
	if cfg.Shards == 0 {
		cfg.Shards = 1
	}
	if cfg.EventRetention == 0 {
		cfg.EventRetention = DefaultEventRetention
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ExecutionTTL == 0 {
		cfg.ExecutionTTL = store.DefaultExecutionTTL
	}
	if cfg.AWS != nil && cfg.AWS.Service == "" {
		aws := *cfg.AWS
		aws.Service = "es"
		cfg.AWS = &aws
	}
	return cfg
}

// prefixRe matches a valid IndexPrefix: OpenSearch index names are lower
// case and must not start with '_', '-' or '+'.
var prefixRe = regexp.MustCompile(`^([a-z0-9][a-z0-9_-]*)?$`)

// maxDimension is the largest knn_vector dimension OpenSearch accepts.
const maxDimension = 16000

// Validate reports every invalid field of cfg after defaults are applied,
// each wrapping store.ErrInvalidArgument.
func (cfg Config) Validate() error {
	cfg = cfg.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("opensearch: config: "+format+": %w", append(args, store.ErrInvalidArgument)...))
	}
	for _, raw := range cfg.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("URL %q is not an http(s) URL", raw)
		}
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		bad("Username and Password must be set together")
	}
	if cfg.AWS != nil {
		if cfg.AWS.Region == "" {
			bad("AWS.Region is required for SigV4")
		}
		if cfg.AWS.Service != "es" && cfg.AWS.Service != "aoss" {
			bad("AWS.Service %q is neither \"es\" nor \"aoss\"", cfg.AWS.Service)
		}
		if cfg.Username != "" {
			bad("AWS SigV4 and basic authentication are exclusive")
		}
	}
	if !prefixRe.MatchString(cfg.IndexPrefix) {
		bad("IndexPrefix %q: want lower case letters, digits, '_' and '-', not starting with '_' or '-'", cfg.IndexPrefix)
	}
	if cfg.Dimension < 1 || cfg.Dimension > maxDimension {
		bad("Dimension %d not in [1, %d]", cfg.Dimension, maxDimension)
	}
	if cfg.Engine != EngineLucene && cfg.Engine != EngineFaiss {
		bad("Engine %q is neither %q nor %q", cfg.Engine, EngineLucene, EngineFaiss)
	}
	if cfg.Shards < 1 {
		bad("Shards %d < 1", cfg.Shards)
	}
	if cfg.Replicas < 0 {
		bad("Replicas %d < 0", cfg.Replicas)
	}
	if cfg.RefreshInterval < 0 || cfg.RefreshInterval%time.Millisecond != 0 {
		bad("RefreshInterval %v: want a non-negative whole number of milliseconds", cfg.RefreshInterval)
	}
	switch cfg.ISM {
	case ISMAuto, ISMRequired, ISMDisabled:
	default:
		bad("ISM %q is not \"\", %q or %q", cfg.ISM, ISMRequired, ISMDisabled)
	}
	if cfg.EventRetention < time.Minute || cfg.EventRetention%time.Second != 0 {
		bad("EventRetention %v: want whole seconds, at least 1m", cfg.EventRetention)
	}
	if cfg.ExecutionTTL < time.Second || cfg.ExecutionTTL%time.Second != 0 {
		bad("ExecutionTTL %v: want whole seconds, at least 1s", cfg.ExecutionTTL)
	}
	if cfg.Timeout < 0 {
		bad("Timeout %v < 0", cfg.Timeout)
	}
	return errors.Join(errs...)
}

// clientConfig builds the opensearch-go configuration: addresses,
// authentication, TLS and the optional SigV4 signer. It makes no request:
// AWS credentials are resolved when the first request is signed.
func clientConfig(ctx context.Context, cfg Config) (osgo.Config, error) {
	oc := osgo.Config{
		Addresses:          cfg.URLs,
		Username:           cfg.Username,
		Password:           cfg.Password,
		InsecureSkipVerify: cfg.InsecureSkipVerify,
		Transport:          cfg.Transport,
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return osgo.Config{}, fmt.Errorf("opensearch: CA file: %w", err)
		}
		oc.CACert = pem
	}
	if cfg.AWS != nil {
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.AWS.Region))
		if err != nil {
			return osgo.Config{}, fmt.Errorf("opensearch: AWS config: %w", err)
		}
		signer, err := awsv2.NewSignerWithService(awsCfg, cfg.AWS.Service)
		if err != nil {
			return osgo.Config{}, fmt.Errorf("opensearch: AWS signer: %w", err)
		}
		oc.Signer = signer
	}
	return oc, nil
}
