// Package state is the executor's durable run record: the JSON state file of
// docs/spec/runbooks.md, "Step 4" and "Step 6", written atomically (docs/decisions/durability.md) and guarded by an
// exclusive lock so two executors never drive one run.
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// MaxFileBytes caps the state file read back on resume (256 MiB); a larger file is refused as
// corrupt rather than loaded into memory. The engine caps each step's output
// (engine.MaxOutputBytes) so a run stays far below it.
const MaxFileBytes = 256 << 20

// runIDPattern is the shape of every run id rbook writes (docs/spec/runbooks.md, "Step 2", docs/decisions/run-ids.md). A state
// file whose run_id has another shape is refused: the id becomes part of file names.
var runIDPattern = lazyregexp.New(`^RBOOK-[0-9]{8}-[A-Za-z0-9._-]{1,64}-[0-9a-f]{8}(\.[0-9]+)?$`)

// State is the state file. The first nine fields are exactly the specification's (Step 4); the rest
// are rbook's additions, documented field by field.
type State struct {
	RunID                  string            `json:"run_id"`
	RunbookName            string            `json:"runbook_name"`
	RunStatus              engine.RunStatus  `json:"run_status"`
	CurrentStepIndex       int               `json:"current_step_index"`
	LastCompletedStepIndex int               `json:"last_completed_step_index"`
	TotalSteps             int               `json:"total_steps"`
	EvidencePack           []engine.Evidence `json:"evidence_pack"`
	StartedUTC             string            `json:"started_utc"`
	SchemaHash8            string            `json:"schema_hash8"`

	// CompletedUTC is set when the run reaches a final status (docs/spec/runbooks.md, "Step 6").
	CompletedUTC string `json:"completed_utc,omitempty"`
	// LastDeployName is the most recent (simulated) deployment name, read by cancel (docs/spec/runbooks.md, "Step 8").
	LastDeployName string `json:"last_deploy_name,omitempty"`
	// RunbookHash is the Plan's ContentHash; resuming against another hash is refused.
	RunbookHash string `json:"runbook_hash"`
	// Seq is the sequence number of the last transition recorded (the idempotency key the
	// control plane deduplicates on).
	Seq int64 `json:"seq"`
	// ChainHead is the hash of transition Seq, the head of the run's hash chain, which a
	// resume continues from (docs/evidence-chain.md); absent for a run recorded without
	// the chain.
	ChainHead string `json:"chain_head,omitempty"`
	// InFlight is a side-effecting step that started and has no recorded outcome yet. It is
	// written before the step runs so a crash leaves a trace; resume refuses to guess.
	InFlight *InFlight `json:"in_flight,omitempty"`
	// RollbackFor names the failed step whose on_fail: rollback compensation is still owed.
	RollbackFor string `json:"rollback_for,omitempty"`
	// Interrupted is set when a signal stopped the executor; the run is resumable.
	Interrupted *Interruption `json:"interrupted,omitempty"`
	// AwaitingConfirmation is the confirm gate the run waits at, from its gate_opened until the
	// next transition (a decision, an interruption); nil otherwise.
	AwaitingConfirmation *Gate `json:"awaiting_confirmation,omitempty"`
	// ControlPlane is the URL of the control plane the run reports to ("" for none).
	ControlPlane string `json:"control_plane,omitempty"`
	// ControlPlaneEmbedded is set when that control plane was the embedded one of rbook run:
	// its URL changes every time it starts, so the outbox of such a run is delivered to the
	// embedded control plane of this folder (.rbook/controlplane.db), not to the URL.
	ControlPlaneEmbedded bool `json:"control_plane_embedded,omitempty"`
	// OwnerID identifies the executor instance that owns the run's lease on the control plane
	// (docs/decisions/leases-and-fencing.md): random, made by NewOwnerID, carried from run to run in one workspace.
	OwnerID string `json:"owner_id,omitempty"`
	// OwnerWorkspace is WorkspaceID of the folder that holds OwnerID: a state file copied
	// into another workspace does not carry its owner id along (docs/decisions/leases-and-fencing.md).
	OwnerWorkspace string `json:"owner_workspace,omitempty"`
	// LeaseEpoch is the fencing epoch the control plane gave the last StartRun (docs/decisions/leases-and-fencing.md).
	LeaseEpoch int64 `json:"lease_epoch,omitempty"`
	// Outbox holds transitions not yet acknowledged by the control plane, oldest first; they
	// are sent again (idempotently) on resume, so nothing recorded locally is lost.
	Outbox []engine.Transition `json:"outbox,omitempty"`

	// The playbook additions (docs/spec/playbooks.md, "State file"; playbook.go). All are absent from a
	// runbook's state file.
	//
	// Kind is "playbook" for a .cantbook run; absent for a runbook.
	Kind string `json:"kind,omitempty"`
	// PlaybookPath is the .cantbook the run was started from, as given.
	PlaybookPath string `json:"playbook_path,omitempty"`
	// Inputs are the validated inputs (defaults applied) the run started with; a resume
	// passes them to the engine again (engine.Start.Bindings), which rebuilds the node
	// outputs from the evidence.
	Inputs map[string]any `json:"inputs,omitempty"`
	// Bindings are the run's bindings: the validated inputs at the top level and each node's
	// output under its id (the evidence output of its last PASS, parsed as a JSON object),
	// as playbook_runs.bindings holds them (docs/spec/playbooks.md).
	Bindings map[string]any `json:"bindings,omitempty"`
	// IterationCounts counts each node's executions (step_started) in this run; never reset
	// (the specification's playbook_runs.iteration_counts; docs/spec/playbooks.md, "Iterations").
	IterationCounts map[string]int `json:"iteration_counts,omitempty"`
	// InFlightNodes are the side-effecting nodes (deterministic, agentic) that started and
	// have no recorded outcome yet, in the order they started: several run at once in a DAG.
	// InFlight is the first of them, so runbook readers still see one.
	InFlightNodes []InFlight `json:"in_flight_nodes,omitempty"`
	// EpicID and SessionID are the playbook run's links (columns epic_id, session_id).
	EpicID    string `json:"epic_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`

	// read is set when the State was parsed from a state file, and readPack is how many
	// evidence entries that file held: an evidence pack file that ran ahead of them is this
	// run's own (ranAhead).
	read     bool
	readPack int
}

// Interruption records a signal that stopped the run (docs/runbooks.md, "State, resume and crashes").
type Interruption struct {
	AtUTC  string `json:"at_utc"`
	Reason string `json:"reason"`
}

// Gate is an open confirm gate: its step and when it opened (ISO 8601 UTC).
type Gate struct {
	StepIndex int    `json:"step_index"`
	StepName  string `json:"step_name"`
	SinceUTC  string `json:"since_utc"`
}

// InFlight identifies a started step whose outcome was never recorded.
type InFlight struct {
	StepIndex  int    `json:"step_index"`
	StepName   string `json:"step_name"`
	StepType   string `json:"step_type"`
	StartedUTC string `json:"started_utc"`
}

// ErrNotExist is returned by Read when there is no state file: the only case that means
// "no previous run" (docs/spec/runbooks.md, "Step 3").
var ErrNotExist = errors.New("state file does not exist")

// CorruptError reports a state file that exists but cannot be trusted. It is never taken for
// "no previous run" (docs/decisions/durability.md).
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("state file %s is corrupt: %s; move it aside (or restore it) and run again — rbook will not guess what it held", e.Path, e.Reason)
}

// Read loads the state file at path. It returns ErrNotExist when the file is absent, a
// *SymlinkError when the path goes through a symbolic link (CheckPath), and a *CorruptError
// when it is truncated, not JSON, over MaxFileBytes, or lacks the specification's fields.
func Read(path string) (*State, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotExist
	}
	if isLoop(err) { // replaced by a link since CheckPath looked
		return nil, CheckPath(path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > MaxFileBytes {
		return nil, &CorruptError{path, fmt.Sprintf("%d bytes is over the %d-byte limit", info.Size(), MaxFileBytes)}
	}
	data := make([]byte, info.Size())
	if _, err := f.ReadAt(data, 0); err != nil && info.Size() > 0 {
		return nil, err
	}
	return Parse(path, data)
}

// Parse decodes state file bytes (path is used in errors only). Unknown fields are allowed so
// newer files stay readable; missing specification fields make the file corrupt, and so does a key
// that appears twice in one object at any depth: JSON decoders disagree
// on which of the two wins, so such a file has no single meaning.
func Parse(path string, data []byte) (*State, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &CorruptError{path, "the file is empty"}
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(data, &present); err != nil {
		return nil, &CorruptError{path, "not valid JSON: " + err.Error()}
	}
	if err := checkDuplicateKeys(data); err != nil {
		return nil, &CorruptError{path, err.Error()}
	}
	for _, k := range []string{"run_id", "runbook_name", "run_status", "current_step_index",
		"last_completed_step_index", "total_steps", "evidence_pack", "started_utc", "schema_hash8"} {
		if _, ok := present[k]; !ok {
			return nil, &CorruptError{path, "missing field " + k}
		}
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, &CorruptError{path, err.Error()}
	}
	if !runIDPattern.MatchString(s.RunID) {
		return nil, &CorruptError{path, fmt.Sprintf("run_id %q is not of the form RBOOK-YYYYMMDD-<runbook_name>-<schema_hash8>", s.RunID)}
	}
	switch s.RunStatus {
	case engine.RunInProgress, engine.RunCompleted, engine.RunFailed, engine.RunCancelled:
	default:
		return nil, &CorruptError{path, fmt.Sprintf("run_status %q is not one of IN_PROGRESS, COMPLETED, FAILED, CANCELLED", s.RunStatus)}
	}
	if reason := impossible(&s); reason != "" {
		return nil, &CorruptError{path, reason}
	}
	s.read, s.readPack = true, len(s.EvidencePack)
	return &s, nil
}

// impossible returns why s cannot be a state file rbook wrote, whatever the runbook: "" when
// nothing is out of range. The engine writes seq from 1 up (0 before the first transition),
// current_step_index from 0 to total_steps (total_steps once the last step finished),
// last_completed_step_index from -1 to total_steps-1, step indexes of in-flight steps and open
// gates below total_steps, and evidence entries with a step name and one of the step
// statuses. Checks that need the runbook are checkAgainstPlan's.
func impossible(s *State) string {
	switch {
	case s.Seq < 0:
		return fmt.Sprintf("seq %d is negative", s.Seq)
	case s.ChainHead != "" && !evidencechain.WellFormed(s.ChainHead):
		return fmt.Sprintf("chain_head %q is not sha256: and 64 lowercase hex digits", s.ChainHead)
	case s.ChainHead != "" && s.Seq == 0:
		return "chain_head is set but seq is 0: no transition was recorded"
	case s.LeaseEpoch < 0:
		return fmt.Sprintf("lease_epoch %d is negative", s.LeaseEpoch)
	case s.TotalSteps < 0:
		return fmt.Sprintf("total_steps %d is negative", s.TotalSteps)
	case s.CurrentStepIndex < 0 || s.TotalSteps > 0 && s.CurrentStepIndex > s.TotalSteps:
		return fmt.Sprintf("current_step_index %d is outside 0..%d", s.CurrentStepIndex, s.TotalSteps)
	case s.LastCompletedStepIndex < -1 || s.LastCompletedStepIndex >= s.TotalSteps && s.TotalSteps > 0:
		return fmt.Sprintf("last_completed_step_index %d is outside -1..%d", s.LastCompletedStepIndex, s.TotalSteps-1)
	}
	stepIndex := func(field string, i int) string {
		if i < 0 || s.TotalSteps > 0 && i >= s.TotalSteps {
			return fmt.Sprintf("%s.step_index %d is outside 0..%d", field, i, s.TotalSteps-1)
		}
		return ""
	}
	if s.InFlight != nil {
		if r := stepIndex("in_flight", s.InFlight.StepIndex); r != "" {
			return r
		}
	}
	for i, f := range s.InFlightNodes {
		if r := stepIndex(fmt.Sprintf("in_flight_nodes[%d]", i), f.StepIndex); r != "" {
			return r
		}
	}
	if s.AwaitingConfirmation != nil {
		if r := stepIndex("awaiting_confirmation", s.AwaitingConfirmation.StepIndex); r != "" {
			return r
		}
	}
	for i, e := range s.EvidencePack {
		if e.StepName == "" {
			return fmt.Sprintf("evidence_pack[%d] has no step_name", i)
		}
		switch e.Status {
		case engine.StatusPass, engine.StatusFail, engine.StatusTimedOut, engine.StatusSkipped, engine.StatusAwaitingConfirmation:
		default:
			return fmt.Sprintf("evidence_pack[%d] (step %q) has status %q, not one of PASS, FAIL, TIMED_OUT, SKIPPED, AWAITING_CONFIRMATION", i, e.StepName, e.Status)
		}
	}
	for n, c := range s.IterationCounts {
		if c < 0 {
			return fmt.Sprintf("iteration_counts[%q] %d is negative", n, c)
		}
	}
	return ""
}

// CheckDuplicateKeys is checkDuplicateKeys for other readers of rbook's JSON (the evidence
// verifier reads journal lines with it): an error naming the first key that appears twice in
// one object, case folded, as encoding/json would otherwise keep the last silently.
func CheckDuplicateKeys(data []byte) error { return checkDuplicateKeys(data) }

// checkDuplicateKeys returns an error naming the first key that appears twice in one JSON
// object of data, at any depth, and where ("evidence_pack[2].status"). Keys are compared
// after case folding, because encoding/json matches struct fields without regard to case:
// "run_status" and "RUN_STATUS" would fill the same field. data must be valid JSON.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(at string) error
	walk = func(at string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]string{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				where := k
				if at != "" {
					where = at + "." + k
				}
				fold := strings.ToLower(strings.ToUpper(k))
				if first, dup := seen[fold]; dup {
					if first == k {
						return fmt.Errorf("duplicate key %q at %s", k, where)
					}
					return fmt.Errorf("duplicate key %q at %s (it also appears as %q; keys are matched without regard to case)", k, where, first)
				}
				seen[fold] = k
				if err := walk(where); err != nil {
					return err
				}
			}
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		default:
			return nil
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	return walk("")
}

// Write replaces the state file atomically: a temp file in the same folder is written,
// fsynced and renamed over path, then the folder is fsynced, so a reader (or a crash) sees
// the old file or the new one, never a mix (docs/decisions/durability.md). Errors name the path.
func Write(path string, s *State) error {
	var p Pack
	data, err := p.Encode(s)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// Pack encodes a State whose evidence pack only grows, encoding each entry once: rewriting
// the whole file after every step would otherwise cost O(entries) reflection per step. Outbox
// entries are cached by sequence number for the same reason (a slow control plane lets the
// outbox grow). A write through a Pack (FileRecorder) therefore costs the encoding of the
// header and of the new entries only, plus the write of the file; the cached bytes
// are handed to the file as they are, never copied into one buffer (docs/development.md, "Benchmarks").
//
// The file's layout (docs/decisions/durability.md, "The journal"): run_id, then
// evidence_pack, then every other field, then the outbox. The run id and the entries are
// what a run never changes once written, so they come first: a rewrite that reuses an older
// version of the file (rewriter) writes only what follows the entries that version holds.
type Pack struct {
	n   int
	buf []byte
	// gen changes whenever buf starts over: buf[:k] of one gen never changes, which is what
	// a reused file's prefix is checked against (rewriter).
	gen uint64
	// outbox holds each outbox transition's encoding by seq; spare is the map of the
	// previous write, cleared and reused, so a write allocates no map.
	outbox, spare map[int64][]byte
	// pre is the file's start (the run id and the opening of evidence_pack); head is the
	// rest after the entries (the other fields and the outbox); hdr is the scratch buffer enc
	// encodes the fields into.
	pre       []byte
	head, hdr bytes.Buffer
	enc       *json.Encoder
	// bindings and counts cache the playbook's bindings and iteration_counts (packmap.go).
	bindings, counts mapCache
}

// Encode renders s as indented JSON in the state file's layout (run_id, evidence_pack, the
// other fields, the outbox: see Pack). Entries already encoded by this Pack are reused; if
// s's pack is not an extension of what was encoded, it starts over. The result is a new
// slice the caller owns.
func (p *Pack) Encode(s *State) ([]byte, error) {
	parts, err := p.parts(s)
	if err != nil {
		return nil, err
	}
	var n int
	for _, b := range parts {
		n += len(b)
	}
	out := make([]byte, 0, n)
	for _, b := range parts {
		out = append(out, b...)
	}
	return out, nil
}

// parts renders s like Encode as consecutive pieces without joining them: the start (run id
// and the opening of evidence_pack), the cached evidence entries, and the rest. The pieces
// alias p's buffers: they are valid until the next call.
func (p *Pack) parts(s *State) ([3][]byte, error) {
	if p.n > len(s.EvidencePack) {
		p.n, p.buf = 0, nil
		p.gen++
	}
	for ; p.n < len(s.EvidencePack); p.n++ {
		e, err := json.MarshalIndent(s.EvidencePack[p.n], "    ", "  ")
		if err != nil {
			return [3][]byte{}, err
		}
		if p.n > 0 {
			p.buf = append(p.buf, ',')
		}
		p.buf = append(p.buf, "\n    "...)
		p.buf = append(p.buf, e...)
	}
	id, err := json.Marshal(s.RunID)
	if err != nil {
		return [3][]byte{}, err
	}
	p.pre = append(append(append(p.pre[:0], "{\n  \"run_id\": "...), id...), ",\n  \"evidence_pack\": ["...)
	type header State
	h := header(*s)
	h.EvidencePack, h.Outbox = nil, nil
	placeholder := map[string]any{cachedPlaceholderKey: nil}
	if len(s.Bindings) > 0 {
		h.Bindings = placeholder
	}
	if len(s.IterationCounts) > 0 {
		h.IterationCounts = map[string]int{cachedPlaceholderKey: 0}
	}
	if p.enc == nil {
		p.enc = json.NewEncoder(&p.hdr)
		p.enc.SetIndent("", "  ") // as json.MarshalIndent; HTML escaped as json.Marshal does
	}
	p.hdr.Reset()
	// The outer fields hide the header's fields of the same names (encoding/json takes the
	// shallower one): empty, they are left out, so the fields written first are not repeated.
	if err := p.enc.Encode(struct {
		*header
		RunID        string              `json:"run_id,omitempty"`
		Outbox       []engine.Transition `json:"outbox,omitempty"`
		EvidencePack []engine.Evidence   `json:"evidence_pack,omitempty"`
	}{header: &h}); err != nil {
		return [3][]byte{}, err
	}
	fields := p.hdr.Bytes()
	fields = fields[1 : len(fields)-3] // "\n  \"runbook_name\": …" without "{" and "\n}\n"
	if len(s.Bindings) > 0 {
		enc, err := encodeCachedMap(&p.bindings, s.Bindings, valueID)
		if err != nil {
			return [3][]byte{}, err
		}
		if fields, err = spliceCached(fields, "bindings", enc, placeholderJSON); err != nil {
			return [3][]byte{}, err
		}
	}
	if len(s.IterationCounts) > 0 {
		enc, err := encodeCachedMap(&p.counts, s.IterationCounts, func(n int) (any, bool) { return n, true })
		if err != nil {
			return [3][]byte{}, err
		}
		if fields, err = spliceCached(fields, "iteration_counts", enc, placeholderCountJSON); err != nil {
			return [3][]byte{}, err
		}
	}
	p.head.Reset()
	if p.n > 0 {
		p.head.WriteString("\n  ")
	}
	p.head.WriteString("],")
	p.head.Write(fields)
	if len(s.Outbox) > 0 {
		if err := p.appendOutbox(s.Outbox); err != nil {
			return [3][]byte{}, err
		}
	}
	p.head.WriteString("\n}\n")
	return [3][]byte{p.pre, p.buf, p.head.Bytes()}, nil
}

// appendOutbox writes the outbox array into p.head, reusing the encoding of every transition
// the previous write held.
func (p *Pack) appendOutbox(ob []engine.Transition) error {
	keep := p.spare
	if keep == nil {
		keep = make(map[int64][]byte, len(ob))
	}
	p.head.WriteString(",\n  \"outbox\": [")
	for i, t := range ob {
		e, ok := p.outbox[t.Seq]
		if !ok {
			var err error
			if e, err = json.Marshal(t); err != nil {
				return err
			}
		}
		keep[t.Seq] = e
		if i > 0 {
			p.head.WriteByte(',')
		}
		p.head.WriteString("\n    ")
		p.head.Write(e)
	}
	clear(p.outbox)
	p.outbox, p.spare = keep, p.outbox
	p.head.WriteString("\n  ]")
	return nil
}

// WriteFileAtomic writes data to path with the temp-file, fsync, rename, fsync-folder
// sequence of docs/decisions/durability.md. The file mode is 0600: evidence can hold estate details. The temp
// file is ".<name>.tmp-<digits>" in the same folder (TempPattern); an interrupted write can
// leave one behind, which RemoveStaleTemps cleans.
func WriteFileAtomic(path string, data []byte) error {
	return writeFileAtomic(path, true, data)
}

// writeFileAtomic is WriteFileAtomic of the concatenation of parts, written one after the
// other into the temp file (no joined copy is made). Without durable nothing is fsynced:
// the temp file and rename still keep every reader (and an executor killed at any point)
// to the old file or the new one, but a crash of the machine may lose the write, or leave
// the file empty; the state file's rewrite is such a write, backed by the journal
// (docs/decisions/durability.md).
func writeFileAtomic(path string, durable bool, parts ...[]byte) error {
	tmpName, err := writeTemp(path, durable, parts...)
	if err != nil {
		return err
	}
	if err := replaceFile(tmpName, path, durable); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	return syncDir(filepath.Dir(path))
}

// writeFileExclusive is WriteFileAtomic that never replaces an existing file: the temp file
// is hard-linked to path, which fails when path exists. created is false in that case.
func writeFileExclusive(path string, data []byte) (created bool, err error) {
	tmpName, err := writeTemp(path, true, data)
	if err != nil {
		return false, err
	}
	err = os.Link(tmpName, path)
	os.Remove(tmpName)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, syncDir(filepath.Dir(path))
}

// writeTemp writes the concatenation of parts to a new 0600 temp file beside path, fsynced
// when durable, and returns its name.
func writeTemp(path string, durable bool, parts ...[]byte) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	tmpName := tmp.Name()
	cleanup := func(err error) (string, error) {
		tmp.Close()
		os.Remove(tmpName)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	for _, data := range parts {
		if _, err := tmp.Write(data); err != nil {
			return cleanup(err)
		}
	}
	if err := tmp.Chmod(0o600); err != nil {
		return cleanup(err)
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			return cleanup(err)
		}
	}
	if err := tmp.Close(); err != nil {
		return cleanup(err)
	}
	return tmpName, nil
}
