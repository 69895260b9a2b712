package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbus/agentbus/fault"
)

// Isolation mechanisms accepted by Config.Isolation and reported by Sandbox.Isolation.
const (
	// IsolationAuto picks bwrap when it works here, else namespaces.
	IsolationAuto = "auto"
	// IsolationBwrap runs python3 under bubblewrap.
	IsolationBwrap = "bwrap"
	// IsolationNamespaces runs python3 in fresh Linux namespaces set up by a
	// re-executed helper of the current binary (no bwrap needed).
	IsolationNamespaces = "namespaces"
	// IsolationNone runs python3 unconfined (rlimits, timeout and output cap
	// only). It requires Config.AllowUnsafeNoIsolation and is for development.
	IsolationNone = "none"
)

// Reasons reported in Result.Reason.
const (
	ReasonTimeout         = "timeout"
	ReasonOversizedOutput = "oversized_output"
	ReasonExitStatus      = "exit_status"
	ReasonCanceled        = "canceled"
)

// Defaults applied by Config.withDefaults.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultOutputCap     = 500 * 1000
	DefaultMemoryBytes   = 512 << 20
	DefaultCPUSeconds    = 30
	DefaultMaxProcs      = 16
	DefaultFileSizeBytes = 64 << 20
	DefaultPython        = "python3"
	DefaultUID           = 65534
	DefaultSweepAge      = time.Hour

	// stderrCap bounds the captured stderr of a script.
	stderrCap = 64 << 10
	// maxScriptBytes bounds the size of a script or jq expression.
	maxScriptBytes = 256 << 10
	// maxOpenFiles is RLIMIT_NOFILE inside the sandbox.
	maxOpenFiles = 256
)

// Sentinel errors. Check them with errors.Is. A malformed configuration,
// file id, script or argument is permanent (fault.Permanent); a script's
// own failure (ErrScriptFailed, ErrTimeout, ErrOversizedOutput) is its
// result, and a sandbox that cannot start (ErrNoIsolation, ErrSetup) is
// unavailable, which is transient.
var (
	// ErrNoIsolation: no isolation mechanism works here and the development
	// flag does not allow running unconfined. The sandbox fails closed.
	ErrNoIsolation = errors.New("sandbox: no isolation available")
	// ErrInvalidConfig: Config.Validate rejected the configuration.
	ErrInvalidConfig = fault.Permanent(errors.New("sandbox: invalid config"))
	// ErrOversizedOutput: the script wrote more than Config.OutputCap bytes; it
	// was killed and Result.Output holds the first OutputCap bytes.
	ErrOversizedOutput = errors.New("sandbox: oversized_output")
	// ErrTimeout: the script ran past its time limit and was killed.
	ErrTimeout = errors.New("sandbox: timeout")
	// ErrScriptFailed: the script or jq expression ran and failed (non-zero
	// exit, error, or killed by a resource limit); Result.Stderr says why.
	ErrScriptFailed = errors.New("sandbox: script failed")
	// ErrInvalidFileID: a file id is malformed or names no temp file of the task.
	ErrInvalidFileID = fault.Permanent(errors.New("sandbox: invalid file id"))
	// ErrInvalidScript: the script or expression is empty or too large.
	ErrInvalidScript = fault.Permanent(errors.New("sandbox: invalid script"))
	// ErrInvalidArgument: a ReadLines range is negative or too long.
	ErrInvalidArgument = fault.Permanent(errors.New("sandbox: invalid argument"))
	// ErrTaskClosed: the task's temp dir was already wiped.
	ErrTaskClosed = errors.New("sandbox: task closed")
	// ErrSetup: the sandbox could not be started (a host-side failure).
	ErrSetup = errors.New("sandbox: setup failed")
)

// Config configures a Sandbox. The zero value of every field means its default.
type Config struct {
	// Root is the parent dir of task temp dirs (created 0700).
	// Default: os.TempDir()/agentbus-sandbox.
	Root string
	// Timeout is the wall-clock limit of one ExecPython or ExecJQ call, unless
	// the task sets its own. Default 30 s.
	Timeout time.Duration
	// OutputCap is the maximum stdout size in bytes; more is ErrOversizedOutput.
	// Default 500 KB.
	OutputCap int
	// MemoryBytes is RLIMIT_AS of the script's processes. Default 512 MiB.
	MemoryBytes int64
	// CPUSeconds is RLIMIT_CPU of the script's processes. Default 30.
	CPUSeconds int
	// MaxProcs is RLIMIT_NPROC (processes and threads) of the script. Every
	// call gets a fresh user namespace and runs as a non-root host uid, so the
	// kernel counts this limit per call. Default 16.
	MaxProcs int
	// FileSizeBytes is RLIMIT_FSIZE, and also the size of the sandbox's /tmp
	// tmpfs. Default 64 MiB.
	FileSizeBytes int64
	// Python is the interpreter, a name looked up in PATH or a path. It is
	// resolved once by New (sys.executable and sys.base_prefix), and its
	// installation is mounted read-only if it lives outside /usr. Default python3.
	Python string
	// Isolation is one of IsolationAuto (default), IsolationBwrap,
	// IsolationNamespaces or IsolationNone.
	Isolation string
	// AllowUnsafeNoIsolation is the explicit development flag. It is required
	// for IsolationNone, and lets IsolationAuto fall back to running
	// unconfined when no mechanism works. Callers should log loudly when
	// Sandbox.Isolation() reports IsolationNone.
	AllowUnsafeNoIsolation bool
	// UID and GID are the host ids scripts run as when this process runs as
	// root (they must not be 0). A non-root process runs scripts as itself.
	// Default 65534 (nobody).
	UID, GID int
}

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	if cfg.Root == "" {
		cfg.Root = filepath.Join(os.TempDir(), "agentbus-sandbox")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.OutputCap == 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = DefaultMemoryBytes
	}
	if cfg.CPUSeconds == 0 {
		cfg.CPUSeconds = DefaultCPUSeconds
	}
	if cfg.MaxProcs == 0 {
		cfg.MaxProcs = DefaultMaxProcs
	}
	if cfg.FileSizeBytes == 0 {
		cfg.FileSizeBytes = DefaultFileSizeBytes
	}
	if cfg.Python == "" {
		cfg.Python = DefaultPython
	}
	if cfg.Isolation == "" {
		cfg.Isolation = IsolationAuto
	}
	if cfg.UID == 0 {
		cfg.UID = DefaultUID
	}
	if cfg.GID == 0 {
		cfg.GID = DefaultUID
	}
	return cfg
}

// Validate reports whether cfg, after defaults, is usable. It does not probe
// the host; New does.
func (cfg Config) Validate() error {
	cfg = cfg.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case !filepath.IsAbs(cfg.Root):
		return bad("root %q is not absolute", cfg.Root)
	case cfg.Timeout < 0:
		return bad("negative timeout")
	case cfg.OutputCap < 0:
		return bad("negative output cap")
	case cfg.MemoryBytes < 64<<20:
		return bad("memory limit %d below 64 MiB", cfg.MemoryBytes)
	case cfg.CPUSeconds < 0:
		return bad("negative cpu seconds")
	case cfg.MaxProcs < 2:
		return bad("max procs %d below 2", cfg.MaxProcs)
	case cfg.FileSizeBytes < 0:
		return bad("negative file size limit")
	case cfg.UID < 0 || cfg.GID < 0:
		return bad("uid/gid must be positive")
	}
	switch cfg.Isolation {
	case IsolationAuto, IsolationBwrap, IsolationNamespaces:
	case IsolationNone:
		if !cfg.AllowUnsafeNoIsolation {
			return fmt.Errorf("%w: isolation %q needs AllowUnsafeNoIsolation", ErrNoIsolation, IsolationNone)
		}
	default:
		return bad("unknown isolation %q", cfg.Isolation)
	}
	return nil
}
