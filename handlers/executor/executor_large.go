package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/sandbox"
)

// Sandbox runs extraction scripts over a task's temp files: write_temp,
// read_lines, exec_python and exec_jq of seed 000 §7.
type Sandbox interface {
	NewTask(taskID string) (*sandbox.Task, error)
	ExecPython(ctx context.Context, t *sandbox.Task, script, fileID string) (sandbox.Result, error)
	ExecJQ(ctx context.Context, t *sandbox.Task, expr, fileID string) (sandbox.Result, error)
}

// maxExtractAttempts bounds the scripts written for one large response.
const maxExtractAttempts = 3

// sampleLines is how many lines of a large response the model sees.
const sampleLines = 20

// extractLarge is the content-length gate's large path (seed 000 §6): the
// response goes to a task-scoped temp file, the model reads a sample and
// writes a script that keeps only the return_spec fields, and the sandbox
// runs it. The small result replaces the response in the step's context.
// The temp dir is wiped when this returns. A response that cannot be
// reduced comes back as an error result for the model to act on.
func (t *turn) extractLarge(ctx context.Context, skill string, data []byte) ([]byte, bool, error) {
	lin := t.lineage()
	lin.SkillID = skill
	if t.exec.Sandbox == nil {
		return fmt.Appendf(nil, "large_response: skill %s returned %d bytes (gate %d) and this executor has no sandbox to extract from it",
			skill, len(data), t.exec.LargeResponse), true, nil
	}
	task, err := t.exec.Sandbox.NewTask(t.step.TaskID)
	if err != nil {
		return nil, false, fmt.Errorf("handlers: sandbox task: %w", err)
	}
	defer task.Close()
	fileID, err := task.WriteTemp(data)
	if err != nil {
		return nil, false, fmt.Errorf("handlers: write_temp: %w", err)
	}
	sample, err := task.ReadLines(fileID, 0, sampleLines)
	if err != nil {
		return nil, false, fmt.Errorf("handlers: read_lines: %w", err)
	}
	t.out.Audit("large_response.detected", lin, map[string]any{"file_id": fileID, "size_bytes": len(data),
		"threshold_bytes": t.exec.LargeResponse, "strategy": "sandbox_extract", "sample_lines": len(sample)})
	in := llm.ExtractInput{Task: t.step.Task, Skill: t.skills[skill], FileID: fileID, SizeBytes: len(data), Sample: sample,
		ReturnSpec: llm.ReturnSpec{Shape: t.step.ReturnSpec.Shape, Reason: t.step.ReturnSpec.Reason},
		Languages:  []string{"python", "jq"}}
	for range maxExtractAttempts {
		var script llm.ExtractOutput
		req := llm.NewRequest(llm.TaskExtract, in)
		req.Schema = llm.ExtractSchema
		if _, err := llm.Structured(ctx, t.model, req, &script); err != nil {
			if errors.Is(err, llm.ErrInvalidOutput) {
				return []byte("large_response: no valid extraction script: " + err.Error()), true, nil
			}
			return nil, false, fmt.Errorf("handlers: extraction script: %w", err)
		}
		out, feedback, err := t.runScript(ctx, task, fileID, script, lin)
		if err != nil || feedback == "" {
			return out, false, err
		}
		in.Feedback = feedback
	}
	return []byte("large_response: extraction failed: " + in.Feedback), true, nil
}

// runScript runs one extraction script and audits it. It returns the
// output, or feedback for the next attempt when the script failed.
func (t *turn) runScript(ctx context.Context, task *sandbox.Task, fileID string, script llm.ExtractOutput, lin events.Audit) ([]byte, string, error) {
	run, name := t.exec.Sandbox.ExecPython, "python_script.executed"
	if script.Language == "jq" {
		run, name = t.exec.Sandbox.ExecJQ, "jq_script.executed"
	}
	res, err := run(ctx, task, script.Script, fileID)
	lin.ScriptHash = res.ScriptHash
	t.out.Audit(name, lin, map[string]any{"script_hash": res.ScriptHash, "input_rows": res.InputRows,
		"output_rows": res.OutputRows, "duration_ms": res.Duration.Milliseconds(), "exit_code": res.ExitCode,
		"reason": res.Reason, "output_bytes": len(res.Output)})
	switch {
	case errors.Is(err, sandbox.ErrOversizedOutput):
		return nil, "the output exceeded the sandbox's output cap; select only the return_spec fields", nil
	case errors.Is(err, sandbox.ErrNoIsolation), errors.Is(err, sandbox.ErrSetup):
		return nil, "", fmt.Errorf("handlers: sandbox: %w", err)
	case err != nil:
		return nil, fmt.Sprintf("the script failed (%s, exit %d): %s", res.Reason, res.ExitCode, lastLine(res.Stderr)), nil
	case !json.Valid(res.Output):
		return nil, "the script printed something that is not JSON", nil
	}
	return res.Output, "", nil
}

func lastLine(b []byte) string {
	s := strings.TrimRight(string(b), "\n ")
	return s[strings.LastIndex(s, "\n")+1:]
}
