package app

import (
	"time"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/handlers/ledger"
	"github.com/agentbus/agentbus/handlers/memory"
	"github.com/agentbus/agentbus/llm/provider"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/opensearch"
)

// The sections of docs/CONFIGURATION.md, in order (sectionIntro says who
// reads each).
const (
	secNATS     = "NATS"
	secProcess  = "Processing"
	secStore    = "Store"
	secSkills   = "Skills"
	secModels   = "Models"
	secIngress  = "Ingress"
	secTracing  = "Tracing"
	secCommands = "agentbus commands"
)

// Every environment variable agentbus reads, declared once: the parser
// and docs/CONFIGURATION.md both come from here.

// NATS.
var (
	EnvNATSURL = String(secNATS, "NATS_URL", "nats", "nats://127.0.0.1:4222", natsURLs,
		"NATS server URL, or the comma-separated URLs of a cluster's nodes")
	EnvNATSUser = String(secNATS, "NATS_USER", "nats-user", "", text("a user name"),
		"NATS user of this process on a server with per-role permissions (agentbus nats --permissions)")
	EnvNATSPassword = Secret(secNATS, "NATS_PASSWORD",
		"the NATS user's password; or in the file of NATS_PASSWORD_FILE")
	envNATSPasswordFile = String(secNATS, "NATS_PASSWORD_FILE", "nats-password-file", "", text("a file path"),
		"file holding the NATS user's password; it may instead be in env NATS_PASSWORD")
	envReplicas = Int(secNATS, "REPLICAS", "replicas", 0,
		"replicas of every stream and bucket; 0: 1 on a single server, 3 on a cluster; the same in every process")
	envAckWait    = Duration(secNATS, "ACK_WAIT", "ack-wait", 30*time.Second, "JetStream ack wait of the role consumers")
	envMaxDeliver = Int(secNATS, "MAX_DELIVER", "max-deliver", 10, "deliveries before a message is dead-lettered")
)

// Processing.
var (
	EnvLogLevel = String(secProcess, "LOG_LEVEL", "log-level", "info", logLevel,
		"log level: debug, info, warn, error (agentbus demo: warn)")
	envMetricsAddr = String(secProcess, "METRICS_ADDR", "metrics-addr", "", addr,
		"serve Prometheus /metrics on this address, e.g. :9464 (the ingress also serves it on its own listener)")
	envConcurrency = Int(secProcess, "CONCURRENCY", "concurrency", 16,
		"messages each role of the process handles at once; the projector reads in batches of up to 256")
	envMaxTurns      = Int(secProcess, "MAX_TURNS", "max-turns", 6, "model turns one step may take before it fails")
	envHandleTimeout = Duration(secProcess, "HANDLE_TIMEOUT", "handle-timeout", 5*time.Minute, "deadline of one message's work")
	envContextTokens = Int(secProcess, "CONTEXT_TOKENS", "context-tokens", executor.DefaultContextTokens,
		"context budget of a step's turns in tokens; past 80 % older turns are compressed")
	envRecallTopK = Int(secProcess, "RECALL_TOP_K", "recall-top-k", memory.DefaultRecallTopK,
		"memories of its tenant, user and session a run recalls at most when it starts (most similar to its task); 0 recalls none")
	envDefaultDailyTokens = Int(secProcess, "DEFAULT_DAILY_TOKENS", "default-daily-tokens", -1,
		"daily token quota of every tenant the budget policy gives none (quotas.tenants); -1: 100000 when a role's model is not the offline one, none with the offline model (it costs nothing); 0: none")
	envRecallTokens = Int(secProcess, "RECALL_TOKENS", "recall-tokens", memory.DefaultRecallTokens,
		"token budget of the memories a run recalls (four bytes a token)")
	envRepeatCallLimit = Int(secProcess, "REPEAT_CALL_LIMIT", "repeat-call-limit", executor.DefaultRepeatCallLimit,
		"identical calls (same skill, same arguments) one step may make; the next ends the run REPEATED_FAILURE")
	envSandboxUnsafe = Bool(secProcess, "SANDBOX_ALLOW_UNSAFE", "sandbox-unsafe",
		"DEVELOPMENT ONLY: run extraction scripts without isolation when none is available")
	envAlertWebhook = String(secProcess, "ALERT_WEBHOOK_URL", "alert-webhook", "", httpURL,
		"POST every alert's change of state here, signed with ALERT_WEBHOOK_SECRET")
	envAlertSecret    = Secret(secProcess, "ALERT_WEBHOOK_SECRET", "the HMAC key that signs the alert webhook's POSTs")
	envSecretsKeyFile = String(secProcess, "SECRETS_KEY_FILE", "secrets-key-file", "", text("a file path"),
		"file holding the base64 32-byte key that encrypts webhook tools' secrets; the key may instead be in env SECRETS_KEY; "+
			"without one webhook tools cannot be created")
	envSecretsKey  = Secret(secProcess, "SECRETS_KEY", "the base64 32-byte key that encrypts webhook tools' secrets")
	envEgressAllow = String(secProcess, "EGRESS_ALLOW", "egress-allow", "", egressList,
		"what webhook tools and the OAuth requests to URLs a Skill Service names may reach although the egress policy refuses it "+
			"(loopback, link-local and cloud metadata, private, shared 100.64/10, multicast, unspecified and reserved addresses): "+
			"host names (*.suffix for a domain's subdomains), IP addresses and CIDR prefixes, separated by commas; "+
			"the operator's own endpoints (SKILL_SERVICE_URL, ALERT_WEBHOOK_URL, models, OpenSearch, JWKS) are not held to it")
)

// Store.
var (
	envStore = String(secStore, "STORE", "store", "embedded", oneOf("embedded", "opensearch"),
		"storage backend: embedded (in JetStream) or opensearch (OPENSEARCH_URL and friends)")
	envStorePrefix    = String(secStore, "STORE_PREFIX", "store-prefix", "", text("a name prefix"), "name prefix of the store's buckets and indices")
	envEventRetention = Duration(secStore, "EVENT_RETENTION", "event-retention", store.DefaultEventRetention,
		"how long trace events (agent_events) are kept: the embedded store's events stream's age limit; "+
			"with opensearch, the retention policy's unless OPENSEARCH_EVENT_RETENTION is set")
	envMemoryTTLSession = Duration(secStore, "MEMORY_TTL_SESSION", "memory-ttl-session", store.DefaultSessionMemoryTTL,
		"how long session memories (step outputs, set_context values) are kept: their ttl_at; 0 keeps them for ever")
	envMemoryTTLUser = Duration(secStore, "MEMORY_TTL_USER", "memory-ttl-user", store.DefaultUserMemoryTTL,
		"how long a user's memories (facts posted to /agent/memory, successful exchanges) are kept; 0 keeps them for ever")
	envMemoryTTLTenant = Duration(secStore, "MEMORY_TTL_TENANT", "memory-ttl-tenant", store.DefaultTenantMemoryTTL,
		"how long a tenant's facts posted to /agent/memory are kept; 0 keeps them for ever")
	envExecutionTTL = Duration(secStore, "EXECUTION_RECORD_TTL", "execution-record-ttl", store.DefaultExecutionTTL,
		"how long execution records (GET /agent/executions) are kept: the embedded bucket's TTL, the OpenSearch ISM policy")
	envOpenSearchURL = String(secStore, "OPENSEARCH_URL", "", opensearch.DefaultURL, httpURLs,
		"the OpenSearch nodes of STORE=opensearch")
	envOpenSearchUser     = String(secStore, "OPENSEARCH_USERNAME", "", "", text("a user name"), "OpenSearch basic-authentication user")
	envOpenSearchPassword = Secret(secStore, "OPENSEARCH_PASSWORD", "OpenSearch basic-authentication password")
	envOpenSearchCA       = String(secStore, "OPENSEARCH_CA_FILE", "", "", text("a file path"),
		"PEM file of the certificate authorities OpenSearch's TLS certificate is checked against")
	envOpenSearchInsecure = Bool(secStore, "OPENSEARCH_INSECURE_SKIP_VERIFY", "",
		"do not verify OpenSearch's TLS certificate (development only)")
	envOpenSearchRegion = String(secStore, "OPENSEARCH_AWS_REGION", "", "", text("an AWS region"),
		"sign requests with AWS SigV4 for this region (Amazon OpenSearch Service or Serverless)")
	envOpenSearchService = docDefault(String(secStore, "OPENSEARCH_AWS_SERVICE", "", "", oneOf("es", "aoss"),
		"the SigV4 service: es (OpenSearch Service) or aoss (Serverless)"), "es")
	envOpenSearchPrefix = String(secStore, "OPENSEARCH_INDEX_PREFIX", "", "", text("a name prefix"),
		"name prefix of the indices (STORE_PREFIX wins)")
	envOpenSearchDimension = docDefault(Int(secStore, "OPENSEARCH_DIMENSION", "", 0,
		"knn_vector dimension of agent_memory; must equal EMBEDDING_DIMENSION when both are set"), "EMBEDDING_DIMENSION's")
	envOpenSearchISM = docDefault(String(secStore, "OPENSEARCH_ISM", "", "", oneOf("required", "disabled"),
		"the retention policy: required (fail without the ISM plugin) or disabled; unset, it is installed when ISM is there"), "auto")
	envOpenSearchRetention = Duration(secStore, "OPENSEARCH_EVENT_RETENTION", "", opensearch.DefaultEventRetention,
		"how long agent_events indices are kept after they roll over (daily)")
)

// Skills.
var (
	EnvSkillServiceURL = String(secSkills, "SKILL_SERVICE_URL", "skills", "http://127.0.0.1:7070/tenants/{tenant}/mcp", httpURL,
		"MCP server URL of the HTTP skill transports (.../sse for sse); {tenant}, if present, is replaced by the run's tenant")
	envSkillAPIKey    = Secret(secSkills, "SKILL_SERVICE_API_KEY", "sent as X-Api-Key to the Skill Service when the caller sent none")
	EnvSkillTransport = String(secSkills, "SKILL_TRANSPORT", "skill-transport", skills.TransportStreamableHTTP,
		oneOf(skills.TransportStreamableHTTP, skills.TransportSSE, skills.TransportStdio), "MCP transport to the skills: streamable-http, sse or stdio")
	envSkillMode = String(secSkills, "SKILL_MODE", "skill-mode", skills.ModeAuto,
		oneOf(skills.ModeAuto, skills.ModeSkillService, skills.ModePlain),
		"auto, skill-service (find_relevant_skills/load_skill) or plain (any MCP server's tools)")
	envSkillCommand = String(secSkills, "SKILL_COMMAND", "skill-command", "", commandLine,
		"stdio MCP server command line, split on spaces or a JSON array; one server serves every tenant")
	envSkillTimeout = Duration(secSkills, "SKILL_TIMEOUT", "skill-timeout", executor.DefaultSkillTimeout,
		"bound of one skill call: a call that takes longer fails its step, and the run replans around it")
	envBreakerFailures = Int(secSkills, "SKILL_BREAKER_FAILURES", "breaker-failures", 5,
		"consecutive failures of a skill that open its circuit: its calls then fail fast")
	envBreakerCooldown = Duration(secSkills, "SKILL_BREAKER_COOLDOWN", "breaker-cooldown", 30*time.Second,
		"how long an open circuit fails calls fast before one trial call")
	envSkillOAuthClientID = String(secSkills, "SKILL_OAUTH_CLIENT_ID", "skill-oauth-client-id", "", text("an OAuth client id"),
		"OAuth client id for a Skill Service that requires client credentials; the secret is read from env SKILL_OAUTH_CLIENT_SECRET only")
	envSkillOAuthSecret  = Secret(secSkills, "SKILL_OAUTH_CLIENT_SECRET", "the OAuth client secret of SKILL_OAUTH_CLIENT_ID")
	envSkillOAuthKeyFile = String(secSkills, "SKILL_OAUTH_KEY_FILE", "skill-oauth-key-file", "", text("a file path"),
		"PEM private key that signs a private_key_jwt assertion instead of a client secret")
	envSkillOAuthFile = String(secSkills, "SKILL_OAUTH_CREDENTIALS_FILE", "skill-oauth-credentials", "", text("a file path"),
		`JSON file of OAuth client credentials per tenant ("*" for the others): {"acme": {"client_id": "...", "client_secret": "..." or "private_key_file": "...", "scopes": [...]}}`)
	envSkillOAuthScopes = String(secSkills, "SKILL_OAUTH_SCOPES", "skill-oauth-scopes", "", text("scopes separated by spaces"),
		"scopes to ask for when the Skill Service's challenge and metadata name none, space-separated")
)

// Models.
var (
	envModel = String(secModels, "MODEL", "model", provider.Offline, modelSpec,
		"model of every role: offline, openai:<model>, anthropic:<model> or bedrock:<model>")
	envModelRouter = docDefault(String(secModels, "MODEL_ROUTER", "model-router", "", modelSpec,
		"routing model; default --model"), "MODEL's")
	envModelPlanner = docDefault(String(secModels, "MODEL_PLANNER", "model-planner", "", modelSpec,
		"planning model; default --model"), "MODEL's")
	envModelExecutor = docDefault(String(secModels, "MODEL_EXECUTOR", "model-executor", "", modelSpec,
		"executor model; default --model"), "MODEL's")
	envModelSynthesiser = docDefault(String(secModels, "MODEL_SYNTHESISER", "model-synthesiser", "", modelSpec,
		"answer-writing model; default --model"), "MODEL's")
	envModelBaseURL = docDefault(String(secModels, "MODEL_BASE_URL", "model-base-url", "", httpURL,
		"provider endpoint, e.g. a vLLM, Ollama or LiteLLM server's /v1 URL; default the provider's own"), "the provider's")
	envModelAPIKey = docDefault(Secret(secModels, "MODEL_API_KEY",
		"the provider API key; without it or MODEL_API_KEY_FILE each provider's SDK reads its own variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, the AWS chain)"),
		"the SDK's own")
	envModelAPIKeyFile = String(secModels, "MODEL_API_KEY_FILE", "model-api-key-file", "", text("a file path"),
		"file holding the provider API key; the key may instead be in env MODEL_API_KEY")
	envModelTemperature = docDefault(String(secModels, "MODEL_TEMPERATURE", "model-temperature", "", temperature,
		"sampling temperature; default the provider's"), "the provider's")
	envModelAliases = String(secModels, "MODEL_ALIASES", "model-aliases", "", aliasPairs,
		"agent model names the provider serves, as name=model-id pairs separated by commas; an agent naming another model runs on the role's model")
	envModelMaxTokens  = Int(secModels, "MODEL_MAX_TOKENS", "model-max-tokens", 4096, "output tokens per model call")
	envModelTimeout    = Duration(secModels, "MODEL_TIMEOUT", "model-timeout", 2*time.Minute, "timeout of one model request attempt")
	envModelMaxRetries = Int(secModels, "MODEL_MAX_RETRIES", "model-max-retries", 2,
		"retries of a model call on 429, 5xx or a lost connection, with backoff, jitter and Retry-After")
	envModelFallback = String(secModels, "MODEL_FALLBACK", "model-fallback", "", oneOf(provider.Offline),
		"offline: answer with the offline model while the provider is unavailable, instead of ending the run UNAVAILABLE_DEP")
	envModelPrices = String(secModels, "MODEL_PRICES_FILE", "model-prices", "", text("a file path"),
		`JSON price table added to the built-in one: {"<model>": {"input": USD/Mtok, "cached_input": …, "output": …}}`)
	envBedrockRegion = docDefault(String(secModels, "BEDROCK_REGION", "model-region", "", text("an AWS region"),
		"Bedrock AWS region; default the AWS chain's"), "the AWS chain's")
	envEmbedder = String(secModels, "EMBEDDER", "embedder", provider.Offline, embedderSpec,
		"memory embeddings: offline (hashed n-grams) or openai:<model> at --model-base-url")
	envEmbeddingDimension = Int(secModels, "EMBEDDING_DIMENSION", "embedding-dimension", DefaultEmbeddingDimension,
		"length of the memory embeddings; with the opensearch store it is also the knn_vector dimension")
	envModelConcurrency = Int(secModels, "MODEL_MAX_CONCURRENCY", "model-max-concurrency", DefaultModelConcurrency,
		"model calls in flight to each provider (openai, anthropic, bedrock) from this process; further calls wait. "+
			"Per process: set it to the provider's limit divided by the processes that call it")
)

// Ingress.
var (
	EnvIngressAddr = String(secIngress, "INGRESS_ADDR", "http", "127.0.0.1:8080", addr,
		"ingress listen address; beyond loopback it needs an authentication mode")
	envRateLimit = Int(secIngress, "RATE_LIMIT_PER_MINUTE", "rate-limit", ledger.DefaultRequestsPerMinute,
		"runs a tenant may start per minute across every ingress, POST /agent/run and /agent/events; past it 429 with Retry-After")
	envTenantRuns = Int(secIngress, "TENANT_MAX_CONCURRENT_RUNS", "max-concurrent-runs", ledger.DefaultConcurrentRuns,
		"runs of one tenant in flight at once across every ingress; past it 429 with Retry-After")
	envRunLeaseTTL = Duration(secIngress, "RUN_LEASE_TTL", "run-lease-ttl", ledger.DefaultRunLeaseTTL,
		"how long a run holds its concurrency slot if its end is never seen (a process died); at most 23h")
	envIngressToken = SecretFlag(secIngress, "INGRESS_TOKEN", "token",
		"service token of a trusted front end that names tenants in X-Tenant-Id")
	envIngressAPIKeys = Bool(secIngress, "INGRESS_API_KEYS", "api-keys",
		"accept tenant API keys (agentbus tenants create) as bearer credentials")
	envJWKS = String(secIngress, "INGRESS_JWT_JWKS", "jwt-jwks", "", text("a file path or an http(s) URL"),
		"accept JWT bearer tokens verified against this JWKS file or http(s) URL; RS256, ES256")
	envJWTIssuer      = String(secIngress, "INGRESS_JWT_ISSUER", "jwt-issuer", "", text("text"), "required JWT iss")
	envJWTAudience    = String(secIngress, "INGRESS_JWT_AUDIENCE", "jwt-audience", "", text("text"), "required JWT aud")
	envJWTTenantClaim = String(secIngress, "INGRESS_JWT_TENANT_CLAIM", "jwt-tenant-claim", auth.DefaultTenantClaim, text("a claim name"),
		"JWT claim naming the tenant")
	envJWTUserClaim = String(secIngress, "INGRESS_JWT_USER_CLAIM", "jwt-user-claim", auth.DefaultUserClaim, text("a claim name"),
		"JWT claim naming the user, falling back to sub")
	envJWTHS256Secret = Secret(secIngress, "INGRESS_JWT_HS256_SECRET", "accept HS256 JWTs signed with this secret (development)")
)

// Tracing: the OpenTelemetry SDK reads these and its other OTEL_*
// variables itself; either endpoint turns export on.
var (
	envOTLPEndpoint = String(secTracing, "OTEL_EXPORTER_OTLP_ENDPOINT", "", "", httpURL,
		"export traces over OTLP/HTTP to this base URL (/v1/traces is appended), e.g. http://127.0.0.1:4318")
	envOTLPTracesEndpoint = String(secTracing, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", "", httpURL,
		"export traces over OTLP/HTTP to this URL, as it is")
)

// The agentbus command's own.
var (
	EnvData = String(secCommands, "AGENTBUS_DATA", "data", "./data", text("a directory"),
		"data directory: the NATS file store and embedded store (agentbus up); agentbus nats stores in <dir>/nats")
	EnvSyncAlways = Bool(secCommands, "NATS_SYNC_ALWAYS", "sync-always",
		"fsync every JetStream write (sync_interval: always): acknowledged writes survive a power loss, at a cost (docs/PERFORMANCE.md) (agentbus up)")
	EnvSkillsAddr = String(secCommands, "SKILLS_ADDR", "addr", "127.0.0.1:7070", addr, "listen address of the demo Skill Service (agentbus skills)")
	EnvURL        = String(secCommands, "AGENTBUS_URL", "url", "http://127.0.0.1:8080", httpURL,
		"the ingress URL (agentbus run, cancel, approve, interrupt, resume, steer)")
	EnvKey = Secret(secCommands, "AGENTBUS_KEY",
		"the bearer credential sent, a tenant API key or JWT (agentbus run, cancel, approve, interrupt, resume, steer)")
	EnvNATSPermissions = Bool(secCommands, "NATS_PERMISSIONS", "permissions",
		"one NATS user per role process, the ingress and admin, each allowed only its own subjects; "+
			"passwords in --users-file, the topology set up by admin (agentbus nats)")
	EnvNATSServerName = docDefault(String(secCommands, "NATS_SERVER_NAME", "name", "", text("a name"),
		`server name, unique within a cluster; default "agentbus", required with --cluster (agentbus nats)`), "agentbus")
	EnvNATSCluster = String(secCommands, "NATS_CLUSTER", "cluster", "", addr,
		"host:port of this node's cluster listener: run as one node of a JetStream cluster, with --routes and --name (agentbus nats)")
	EnvNATSClusterName = String(secCommands, "NATS_CLUSTER_NAME", "cluster-name", "agentbus", text("a name"),
		"name of the cluster, the same on every node (agentbus nats)")
	EnvNATSRoutes = String(secCommands, "NATS_ROUTES", "routes", "", routes,
		"comma-separated cluster addresses of the other nodes, host:port or nats-route://host:port (agentbus nats)")
	EnvNATSMonitor = String(secCommands, "NATS_MONITOR", "monitor", "", addr,
		"host:port of the HTTP monitoring endpoint; /healthz answers 200 once this node's JetStream is current (agentbus nats)")
	EnvConformanceScenario = String(secCommands, "MCP_CONFORMANCE_SCENARIO", "", "", text("a scenario name"),
		"the MCP conformance suite's scenario (agentbus mcp-conformance-client)")
	EnvConformanceContext = hidden(String(secCommands, "MCP_CONFORMANCE_CONTEXT", "", "", jsonObject,
		"the scenario's credentials, from the conformance suite (agentbus mcp-conformance-client)"))
)
