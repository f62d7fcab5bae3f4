package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// MaxStreamBytes caps what a deterministic node keeps of each of its command's stdout and
// stderr (1 MiB per stream; docs/spec/playbooks.md, "Nodes": "captured, capped, as check output is"). The
// command may write more: the rest is read and discarded, so it never blocks on a full pipe,
// and the kept text ends with TruncatedNote. (The engine cuts the evidence output further, as
// it does for check steps.)
const MaxStreamBytes = 1 << 20

// TruncatedNote is appended to a stream that went over MaxStreamBytes; %d is the number of
// bytes dropped.
const TruncatedNote = "\n[rbook: output truncated, %d more bytes over the %d-byte cap were discarded]"

// Deterministic executes playbook deterministic nodes (runbook.TypeDeterministic; docs/spec/playbooks.md, "Nodes"): it execs Node.Command with Node.Args, without a shell, after rendering each arg,
// each Node.Env value and Node.Cwd with runbook.Render against RunContext.Bindings. Each
// rendered arg is exactly one argv entry, byte for byte (spaces, quotes, newlines, ';',
// "$(x)" or a "{{" inside a value are never re-parsed). The command itself is not templated.
//
// Outcomes: a missing binding → FAIL with the *runbook.MissingVarError text naming every
// missing variable, before anything starts; exit 0 → PASS with Value = stdout parsed as a JSON
// object (json.Number for numbers) or else {"stdout": text minus one trailing newline,
// "exit_code": 0}; non-zero exit → FAIL with Value {"stdout", "stderr", "exit_code"} and an
// Output naming the exit code; ctx deadline → TIMED_OUT, ctx cancelled → FAIL, the whole
// process tree killed either way (SIGTERM, then SIGKILL after Grace; a Job Object on Windows).
// stdout and stderr are each capped at MaxStreamBytes. The evidence input is the resolved argv
// as a JSON array (RunInput).
type Deterministic struct {
	// Env is the base environment ("K=V" entries); nil means procgroup.Environ() (rbook's
	// environment without its credentials). Node.Env is added on top (a node's value wins).
	Env []string
	// PathPrepend are folders put first on the child's PATH, in order; relative ones are made
	// absolute against WorkDir. The playbook demo convention (PlaybookBinDirs): the
	// playbook's folder's bin/ when it exists, so runbooks/bin/pnpm is found.
	PathPrepend []string
	// WorkDir is the folder a node's cwd is relative to and the command's folder when it has
	// none; "" means rbook's working folder.
	WorkDir string
	// Grace is the time between SIGTERM and SIGKILL for the command's process tree; <= 0
	// means KillGrace.
	Grace time.Duration
}

// PlaybookBinDirs returns the PathPrepend of the playbook demo convention for the playbook at
// path: [<folder of path>/bin] made absolute when that folder exists, else nil (docs/playbooks.md, "The demo's PATH": runbooks/release.cantbook runs with the stub runbooks/bin/pnpm).
func PlaybookBinDirs(path string) []string {
	dir, err := filepath.Abs(filepath.Join(filepath.Dir(path), "bin"))
	if err != nil {
		return nil
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil
	}
	return []string{dir}
}

// resolved is a node's command line after templating.
type resolved struct {
	argv []string
	env  []string // the child's whole environment
	dir  string
	path string // the child's PATH value
}

// resolve renders the node's args, env values and cwd. All missing bindings across them are
// reported in one *runbook.MissingVarError; a malformed template is a *runbook.TemplateError.
func (d Deterministic) resolve(step runbook.Step, run engine.RunContext) (*resolved, error) {
	n := step.Node
	if n == nil || n.Command == "" {
		return nil, fmt.Errorf("deterministic node %q has no command", step.Name)
	}
	if strings.Contains(n.Command, "{{") {
		return nil, fmt.Errorf("deterministic node %q: command %q is not templated; put the variable part in args", step.Name, n.Command)
	}
	var missing []string
	render := func(tmpl string) (string, error) {
		s, err := runbook.Render(tmpl, run.Bindings)
		var mv *runbook.MissingVarError
		if errors.As(err, &mv) {
			for _, name := range mv.Names {
				if !slices.Contains(missing, name) {
					missing = append(missing, name)
				}
			}
			return "", nil
		}
		return s, err
	}
	r := &resolved{argv: make([]string, 0, 1+len(n.Args))}
	r.argv = append(r.argv, n.Command)
	for i, a := range n.Args {
		s, err := render(a)
		if err != nil {
			return nil, fmt.Errorf("deterministic node %q: args[%d]: %w", step.Name, i, err)
		}
		r.argv = append(r.argv, s)
	}
	env := d.Env
	if env == nil {
		env = procgroup.Environ() // without rbook's credentials (docs/decisions/mcp-config.md, "Environment")
	}
	env = slices.Clone(env)
	for _, k := range slices.Sorted(maps.Keys(n.Env)) {
		s, err := render(n.Env[k])
		if err != nil {
			return nil, fmt.Errorf("deterministic node %q: env.%s: %w", step.Name, k, err)
		}
		env = append(env, k+"="+s)
	}
	cwd, err := render(n.Cwd)
	if err != nil {
		return nil, fmt.Errorf("deterministic node %q: cwd: %w", step.Name, err)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("deterministic node %q: %w", step.Name, runbook.NewMissingVarError(missing, run.Bindings))
	}
	r.dir = d.WorkDir
	if cwd != "" {
		if filepath.IsAbs(cwd) {
			r.dir = cwd
		} else {
			r.dir = filepath.Join(d.WorkDir, cwd)
		}
	}
	r.path = envValue(env, "PATH")
	if len(d.PathPrepend) > 0 {
		dirs := make([]string, 0, len(d.PathPrepend)+1)
		for _, p := range d.PathPrepend {
			if !filepath.IsAbs(p) {
				p = filepath.Join(d.WorkDir, p)
			}
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			dirs = append(dirs, p)
		}
		if r.path != "" {
			dirs = append(dirs, r.path)
		}
		r.path = strings.Join(dirs, string(os.PathListSeparator))
		env = append(env, "PATH="+r.path)
	}
	r.env = env
	return r, nil
}

// envValue is the last value of key in env (the one exec gives the child); on Windows keys
// compare case-insensitively.
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		k, val, ok := strings.Cut(kv, "=")
		if ok && (k == key || runtime.GOOS == "windows" && strings.EqualFold(k, key)) {
			v = val
		}
	}
	return v
}

// RunInput is the node's resolved argv as a JSON array (["pnpm","run","build"]), the
// evidence input of a deterministic node (engine.InputRewriter; docs/decisions/two-renderings.md);
// nil when the node's templates cannot be rendered (the output says why).
func (d Deterministic) RunInput(step runbook.Step, run engine.RunContext) *string {
	r, err := d.resolve(step, run)
	if err != nil {
		return nil
	}
	return jsonInput(r.argv)
}

// Execute runs one deterministic node; see Deterministic.
func (d Deterministic) Execute(ctx context.Context, step runbook.Step, run engine.RunContext) engine.Outcome {
	r, err := d.resolve(step, run)
	if err != nil {
		return engine.Outcome{Status: engine.StatusFail, Output: err.Error()}
	}
	if err := ctx.Err(); err != nil {
		return ctxOutcome(ctx, step, "not started: "+err.Error())
	}
	bin, err := lookPathIn(r.argv[0], r.path, r.dir)
	if err != nil {
		return engine.Outcome{Status: engine.StatusFail, Output: fmt.Sprintf("deterministic node %q: %v", step.Name, err)}
	}
	grace := d.Grace
	if grace <= 0 {
		grace = KillGrace
	}
	cmd := GroupCommand(ctx, grace, bin, r.argv[1:]...)
	cmd.Args[0] = r.argv[0] // argv[0] as written; the program is bin
	cmd.Env = r.env
	cmd.Dir = r.dir
	stdout, stderr := &cappedBuffer{limit: MaxStreamBytes}, &cappedBuffer{limit: MaxStreamBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := StartGroup(cmd); err != nil {
		return engine.Outcome{Status: engine.StatusFail, Output: fmt.Sprintf("deterministic node %q: cannot start %s: %v", step.Name, r.argv[0], err)}
	}
	waitErr := cmd.Wait()
	_ = KillGroup(cmd) // whatever the command left behind in its group does not outlive the node
	outText, errText := stdout.text(), stderr.text()
	if waitErr != nil && ctx.Err() != nil {
		return ctxOutcome(ctx, step, fmt.Sprintf("the process tree of %s was killed (%v)\n%s", r.argv[0], ctx.Err(), streams(outText, errText)))
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return engine.Outcome{Status: engine.StatusFail, Output: fmt.Sprintf("deterministic node %q: %s: %v\n%s", step.Name, r.argv[0], waitErr, streams(outText, errText))}
	}
	if waitErr == nil {
		value := stdoutValue(outText, stdout.truncated > 0)
		return engine.Outcome{Status: engine.StatusPass, Output: compactJSON(value), Value: value}
	}
	code := exitErr.ExitCode()
	how := fmt.Sprintf("exit code %d", code)
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		how = fmt.Sprintf("killed by signal %s (exit code %d)", ws.Signal(), code)
	}
	return engine.Outcome{
		Status: engine.StatusFail,
		Output: fmt.Sprintf("%s failed: %s\n%s", r.argv[0], how, streams(outText, errText)),
		Value:  map[string]any{"stdout": trimNewline(outText), "stderr": trimNewline(errText), "exit_code": code},
	}
}

// ctxOutcome is TIMED_OUT for an expired deadline (the node's timeout) and FAIL for a
// cancellation (the run was stopped).
func ctxOutcome(ctx context.Context, step runbook.Step, msg string) engine.Outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return engine.Outcome{Status: engine.StatusTimedOut, Output: fmt.Sprintf("no result within the node's timeout (%d s): %s", step.TimeoutSeconds, msg)}
	}
	return engine.Outcome{Status: engine.StatusFail, Output: "cancelled: " + msg}
}

func streams(stdout, stderr string) string {
	return "stderr:\n" + stderr + "\nstdout:\n" + stdout
}

func trimNewline(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

// stdoutValue is a successful node's Value: stdout as a JSON object when it is exactly one
// (numbers as json.Number), else {"stdout": text minus one trailing newline, "exit_code": 0}.
func stdoutValue(stdout string, truncated bool) map[string]any {
	if !truncated {
		dec := json.NewDecoder(strings.NewReader(stdout))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err == nil && obj != nil && jsonDepth(obj, 1) <= MaxOutputDepth {
			if _, err := dec.Token(); err == io.EOF { // nothing but space after the object
				return obj
			}
		}
	}
	return map[string]any{"stdout": trimNewline(stdout), "exit_code": 0}
}

// MaxOutputDepth is the deepest nesting of objects and lists (the object itself is level 1)
// a node's stdout may have to become its output bindings (64, runbook.MaxDepth: the same
// limit as the playbook's YAML). A deeper object is kept as text ({"stdout", "exit_code"}):
// nested under the state file's bindings it would pass encoding/json's read limit of 10000
// levels and make the run's state unreadable (every later write of the state file failed and
// the run could never finish).
const MaxOutputDepth = runbook.MaxDepth

// jsonDepth is the nesting depth of objects and lists of a decoded JSON value at level d
// (scalars add none: {"a":1} is 1, {"a":{"a":1}} is 2). It stops descending past
// MaxOutputDepth.
func jsonDepth(v any, d int) int {
	var kids []any
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			kids = append(kids, e)
		}
	case []any:
		kids = x
	default:
		return d - 1
	}
	if d > MaxOutputDepth {
		return d
	}
	deepest := d
	for _, e := range kids {
		if deepest = max(deepest, jsonDepth(e, d+1)); deepest > MaxOutputDepth {
			break
		}
	}
	return deepest
}

func compactJSON(v map[string]any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// cappedBuffer keeps the first limit bytes written to it and counts the rest.
type cappedBuffer struct {
	buf       bytes.Buffer
	limit     int
	truncated int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	keep := min(len(p), c.limit-c.buf.Len())
	c.buf.Write(p[:keep])
	c.truncated += int64(len(p) - keep)
	return len(p), nil
}

func (c *cappedBuffer) text() string {
	if c.truncated == 0 {
		return c.buf.String()
	}
	return c.buf.String() + fmt.Sprintf(TruncatedNote, c.truncated, c.limit)
}

// lookPathIn finds name as exec.LookPath does, but against the child's PATH value (path)
// rather than rbook's: a name with a path separator is used as is (relative to dir); else
// each absolute PATH entry is tried in order (relative entries, including an empty one, are
// skipped, as LookPath refuses results in the current folder). On Windows the PATHEXT
// extensions are tried too.
func lookPathIn(name, path, dir string) (string, error) {
	exts := []string{""}
	if runtime.GOOS == "windows" {
		exts = append(exts, ".com", ".exe", ".bat", ".cmd")
		if pe := os.Getenv("PATHEXT"); pe != "" {
			exts = append([]string{""}, strings.Split(strings.ToLower(pe), ";")...)
		}
	}
	try := func(p string) (string, bool) {
		for _, ext := range exts {
			if isExecutable(p + ext) {
				return p + ext, true
			}
		}
		return "", false
	}
	if strings.ContainsAny(name, `/`+string(filepath.Separator)) {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if found, ok := try(p); ok {
			return found, nil
		}
		return "", fmt.Errorf("command %q is not an executable file", name)
	}
	for _, entry := range filepath.SplitList(path) {
		if !filepath.IsAbs(entry) {
			continue
		}
		if found, ok := try(filepath.Join(entry, name)); ok {
			return found, nil
		}
	}
	return "", fmt.Errorf("command %q not found on the node's PATH (%s)", name, path)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	if err != nil || st.IsDir() {
		return false
	}
	if runtime.GOOS == "windows" {
		return true
	}
	return st.Mode()&0o111 != 0
}

// jsonInput is a node's recorded input (engine.InputRewriter.RunInput): v as JSON text, or nil when v
// cannot be marshalled. Shared by Deterministic (its argv) and Agentic (its tool call).
func jsonInput(v any) *string {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	s := string(b)
	return &s
}
