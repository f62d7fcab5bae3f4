package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// demoTransitions are the first five transitions of testPlan's run: run_started, check-pre
// started and passed, deploy-app started and passed.
func demoTransitions(runID string) []engine.Transition {
	at := func(seq int64) time.Time { return day.Add(time.Duration(seq) * time.Second) }
	ev := func(name, typ string, seq int64) *engine.Evidence {
		in := "remediation/a.json"
		return &engine.Evidence{StepName: name, Type: typ, Input: &in, Output: `{"count": 0}`, Status: engine.StatusPass, TimestampUTC: engine.FormatTime(at(seq))}
	}
	return []engine.Transition{
		{RunID: runID, Seq: 1, Kind: engine.TransitionRunStarted, Time: at(1), StepIndex: -1, RunStatus: engine.RunInProgress},
		{RunID: runID, Seq: 2, Kind: engine.TransitionStepStarted, Time: at(2), StepIndex: 0, StepName: "check-pre", StepType: "check", RunStatus: engine.RunInProgress},
		{RunID: runID, Seq: 3, Kind: engine.TransitionStepFinished, Time: at(3), StepIndex: 0, StepName: "check-pre", StepType: "check", Evidence: ev("check-pre", "check", 3), RunStatus: engine.RunInProgress},
		{RunID: runID, Seq: 4, Kind: engine.TransitionStepStarted, Time: at(4), StepIndex: 1, StepName: "deploy-app", StepType: "deploy", RunStatus: engine.RunInProgress},
		{RunID: runID, Seq: 5, Kind: engine.TransitionStepFinished, Time: at(5), StepIndex: 1, StepName: "deploy-app", StepType: "deploy", Evidence: ev("deploy-app", "deploy", 5), RunStatus: engine.RunInProgress, LastDeployName: "deploy-app-1"},
	}
}

// recordDemo opens testPlan's run at path and records demoTransitions through one
// FileRecorder. before, when set, is called before each transition is recorded. It returns
// the recorder.
func recordDemo(t *testing.T, path string, before func(engine.Transition)) *FileRecorder {
	t.Helper()
	o, err := Open(testPlan(), path, OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State}
	for _, tr := range demoTransitions(o.State.RunID) {
		if before != nil {
			before(tr)
		}
		if err := fr.Record(t.Context(), tr); err != nil {
			t.Fatal(err)
		}
	}
	return fr
}

// recordedDemo records demoTransitions in a fresh folder, with recovery notices captured,
// and returns the state file's path, the journal's and the recorder.
func recordedDemo(t *testing.T) (path, jp string, fr *FileRecorder) {
	t.Helper()
	captureNotice(t)
	path = filepath.Join(t.TempDir(), "demo.state.json")
	fr = recordDemo(t, path, nil)
	return path, JournalPath(path, fr.State.RunID), fr
}

// captureNotice points RecoveryNotice at a buffer for the test.
func captureNotice(t *testing.T) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	old := RecoveryNotice
	RecoveryNotice = &b
	t.Cleanup(func() { RecoveryNotice = old })
	return &b
}

// TestLostStateFileWriteIsRecoveredFromTheJournal: the state file's rewrite is not fsynced,
// so a crash of the machine can leave it as it was before its last write, empty, cut short,
// or (for a run's first write) not there at all. The journal had the transition (its
// fdatasync came first), so Open rebuilds the file from it, byte for byte what the executor
// had written, says so in one line, and resumes after deploy-app instead of refusing a
// deploy in unknown state.
func TestLostStateFileWriteIsRecoveredFromTheJournal(t *testing.T) {
	cases := []struct {
		name string
		lose func(path string, previous, last []byte) error
		why  string
	}{
		{"restored to its previous version", func(p string, prev, _ []byte) error { return os.WriteFile(p, prev, 0o600) },
			"held the run up to seq 4 but its journal goes on to seq 5"},
		{"truncated to 0 bytes", func(p string, _, _ []byte) error { return os.Truncate(p, 0) },
			"could not be read (the file is empty)"},
		{"cut mid-JSON", func(p string, _, last []byte) error { return os.WriteFile(p, last[:len(last)/2], 0o600) },
			"could not be read (not valid JSON"},
		{"deleted", func(p string, _, _ []byte) error { return os.Remove(p) },
			"is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			notice := captureNotice(t)
			path := filepath.Join(t.TempDir(), "demo.state.json")
			var previous []byte
			fr := recordDemo(t, path, func(tr engine.Transition) {
				if tr.Seq == 5 {
					previous, _ = os.ReadFile(path)
				}
			})
			last, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.lose(path, previous, last); err != nil {
				t.Fatal(err)
			}
			o, err := Open(testPlan(), path, OpenOptions{Now: clock})
			if err != nil {
				t.Fatalf("Open after the lost write: %v", err)
			}
			if !o.Resumed || o.StartIndex != 2 || o.State.Seq != 5 || o.State.InFlight != nil || len(o.State.EvidencePack) != 2 || o.State.LastDeployName != "deploy-app-1" {
				t.Errorf("resumed %v at %d, seq %d, in_flight %+v, %d entries, last deploy %q; want resumed at 2, seq 5, nothing in flight, 2 entries, deploy-app-1",
					o.Resumed, o.StartIndex, o.State.Seq, o.State.InFlight, len(o.State.EvidencePack), o.State.LastDeployName)
			}
			disk, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(disk, last) {
				t.Errorf("rebuilt state file differs from the one the executor wrote:\n%s\n----\n%s", disk, last)
			}
			got := notice.String()
			if strings.Count(got, "\n") != 1 || !strings.Contains(got, c.why) || !strings.Contains(got, JournalPath(path, fr.State.RunID)) {
				t.Errorf("notice %q, want one line saying the file %s and naming the journal", got, c.why)
			}
		})
	}
}

// TestJournalDoesNotOverrideWhatItCannotExplain: a state file that is JSON but corrupt (not
// the shape of a lost write) is still refused, and a finished run's missing state file (moved
// aside by the next run) is not brought back: only a lost write is repaired.
func TestJournalDoesNotOverrideWhatItCannotExplain(t *testing.T) {
	notice := captureNotice(t)
	path := filepath.Join(t.TempDir(), "demo.state.json")
	recordDemo(t, path, nil)
	data, _ := os.ReadFile(path)
	dup := bytes.Replace(data, []byte(`"run_status": "IN_PROGRESS",`), []byte(`"run_status": "IN_PROGRESS", "run_status": "COMPLETED",`), 1)
	if err := os.WriteFile(path, dup, 0o600); err != nil {
		t.Fatal(err)
	}
	var corrupt *CorruptError
	if _, err := Open(testPlan(), path, OpenOptions{Now: clock}); !errors.As(err, &corrupt) || !strings.Contains(corrupt.Reason, "duplicate key") {
		t.Errorf("Open of a state file with a duplicate key: %v, want *CorruptError", err)
	}
	if notice.Len() != 0 {
		t.Errorf("notice %q for a file the journal cannot explain", notice)
	}
}

// TestTornJournalLineIsIgnored: an executor killed inside an append leaves a last line
// without its newline. It was never acknowledged (the fdatasync comes after the write), so
// reading the journal ignores it, a recovery rebuilds the state without it, and the next
// append cuts it off so every line of the journal is whole.
func TestTornJournalLineIsIgnored(t *testing.T) {
	path, jp, fr := recordedDemo(t)
	line, err := journalLine(engine.Transition{RunID: fr.State.RunID, Seq: 6, Kind: engine.TransitionStepStarted, Time: day, StepIndex: 2, StepName: "confirm-app", StepType: "confirm"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(jp, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(line[:len(line)/2]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	h, ts, _, err := ReadJournal(jp)
	if err != nil || h.RunID != fr.State.RunID || len(ts) != 5 || ts[4].Seq != 5 {
		t.Fatalf("ReadJournal with a torn last line: %v, %d transitions", err, len(ts))
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	o, err := Open(testPlan(), path, OpenOptions{Now: clock})
	if err != nil || o.State.Seq != 5 || o.StartIndex != 2 {
		t.Fatalf("Open: %v, seq %d, start %d; want seq 5 (the torn line ignored), start 2", err, o.State.Seq, o.StartIndex)
	}
	next := &FileRecorder{Path: path, State: o.State}
	if err := next.Record(t.Context(), engine.Transition{RunID: o.State.RunID, Seq: 6, Kind: engine.TransitionStepStarted, Time: day, StepIndex: 2, StepName: "confirm-app", StepType: "confirm", RunStatus: engine.RunInProgress}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(jp)
	data = bytes.TrimRight(data, "\x00") // the space reserved for the next lines
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 7 || !strings.HasSuffix(string(data), "\n") {
		t.Fatalf("journal after the next append has %d lines, want header and 6 transitions:\n%s", len(lines), data)
	}
	if _, ts, _, err := ReadJournal(jp); err != nil || len(ts) != 6 || ts[5].Seq != 6 || ts[5].StepName != "confirm-app" {
		t.Fatalf("journal after the next append: %v, %d transitions", err, len(ts))
	}
}

// syncLog is a GroupRecorder placed after a FileRecorder: at each flush the engine makes it
// notes the transitions appended since the previous one and the journal's fdatasyncs and
// fsyncs and the state file's writes the FileRecorder's flush made for them.
type syncLog struct {
	fr                        *FileRecorder
	datasyncs, fsyncs, writes int
	group                     []string
	got                       []string
}

func (w *syncLog) Record(ctx context.Context, t engine.Transition) error {
	_ = w.Append(ctx, t)
	return w.Flush(ctx)
}

func (w *syncLog) Append(_ context.Context, t engine.Transition) error {
	w.group = append(w.group, strings.TrimSpace(string(t.Kind)+" "+t.StepName))
	return nil
}

func (w *syncLog) Flush(context.Context) error {
	if len(w.group) == 0 {
		return nil
	}
	j := &w.fr.journal
	w.got = append(w.got, fmt.Sprintf("%s: fdatasync %d, fsync %d, state write %d", strings.Join(w.group, ", "),
		j.datasyncs-w.datasyncs, j.fsyncs-w.fsyncs, w.fr.writes-w.writes))
	w.datasyncs, w.fsyncs, w.writes, w.group = j.datasyncs, j.fsyncs, w.fr.writes, nil
	return nil
}

// TestEachStepIsOneFdatasync: the journal is created durably once (file and folder fsync,
// with run_started), then the engine flushes a step's finish together with the next step's
// start — one fdatasync of the journal and one state-file rewrite with no fsync per step, made
// before the next step runs; a gate's opening is flushed on its own before the gate waits, its
// decision rides with the next flush, the last step's finish with run_finished. Every
// transition is in the journal, in order.
func TestEachStepIsOneFdatasync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.state.json")
	plan := testPlan()
	o, err := Open(plan, path, OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State}
	log := &syncLog{fr: fr}
	exec := engine.ExecutorFunc(func(context.Context, runbook.Step, engine.RunContext) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Output: `{"count": 0}`}
	})
	gate := gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Approved, By: "token:t", Input: "yes", Source: "test"}, nil
	})
	e := &engine.Engine{Plan: plan, Gate: gate, Recorders: []engine.Recorder{fr, log},
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: exec, runbook.TypeDeploy: exec}}
	if res, err := e.Run(t.Context(), engine.Start{RunID: o.State.RunID, Fresh: true}); err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	want := []string{
		"run_started, step_started check-pre: fdatasync 0, fsync 2, state write 1",
		"step_finished check-pre, step_started deploy-app: fdatasync 1, fsync 0, state write 1",
		"step_finished deploy-app, step_started confirm-app: fdatasync 1, fsync 0, state write 1",
		"gate_opened confirm-app: fdatasync 1, fsync 0, state write 1",
		"gate_decided confirm-app: fdatasync 0, fsync 0, state write 0",
		"step_finished confirm-app, run_finished: fdatasync 1, fsync 0, state write 1",
	}
	if strings.Join(log.got, "\n") != strings.Join(want, "\n") {
		t.Errorf("syncs per transition:\n%s\nwant\n%s", strings.Join(log.got, "\n"), strings.Join(want, "\n"))
	}
	h, ts, _, err := ReadJournal(JournalPath(path, o.State.RunID))
	if err != nil || h.StateFile != "demo.state.json" || h.State == nil || h.State.Seq != 0 || len(ts) != 10 {
		t.Fatalf("journal: %v, header %+v, %d transitions", err, h, len(ts))
	}
	for i, tr := range ts {
		if tr.Seq != int64(i+1) {
			t.Errorf("journal line %d holds seq %d", i+2, tr.Seq)
		}
	}
}

// killEnv names the folder the child process of TestJournalSurvivesKillBetweenAppendAndStateWrite
// records into; killSeqEnv the transition after whose journal append it kills itself.
const (
	killEnv    = "RBOOK_TEST_JOURNAL_KILL_DIR"
	killSeqEnv = "RBOOK_TEST_JOURNAL_KILL_SEQ"
)

// recordUntilKilled records demoTransitions into dir/demo.state.json and kills its own
// process (SIGKILL on unix) right after the journal append of seq killAt, before that
// transition's state-file write. It returns only on failure.
func recordUntilKilled(dir, killAt string) int {
	seq, err := strconv.ParseInt(killAt, 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	path := filepath.Join(dir, "demo.state.json")
	o, err := Open(testPlan(), path, OpenOptions{Now: clock})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fr := &FileRecorder{Path: path, State: o.State}
	fr.appended = func(t engine.Transition) {
		if t.Seq == seq {
			p, _ := os.FindProcess(os.Getpid())
			_ = p.Kill()
			select {}
		}
	}
	for _, tr := range demoTransitions(o.State.RunID) {
		if err := fr.Record(context.Background(), tr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	fmt.Fprintln(os.Stderr, "not killed")
	return 4
}

// TestJournalSurvivesKillBetweenAppendAndStateWrite: an executor killed (kill -9) after a
// transition's journal append and before its state-file rewrite leaves the state file one
// transition behind; the next Open takes the transition from the journal. Killed after
// deploy-app's step_finished, the run resumes after deploy-app rather than refusing a deploy
// in unknown state; killed after its step_started, the deploy is in flight, as recorded.
func TestJournalSurvivesKillBetweenAppendAndStateWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process and kills it")
	}
	for _, c := range []struct {
		killAt   int64
		inFlight bool
	}{{5, false}, {4, true}} {
		t.Run(fmt.Sprintf("after seq %d", c.killAt), func(t *testing.T) {
			notice := captureNotice(t)
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), killEnv+"="+dir, killSeqEnv+"="+strconv.FormatInt(c.killAt, 10))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 3 || exit.ExitCode() == 4 || exit.ExitCode() == 0 {
				t.Fatalf("child: %v\n%s", err, out)
			}
			path := filepath.Join(dir, "demo.state.json")
			before, err := Read(path)
			if err != nil || before.Seq != c.killAt-1 {
				t.Fatalf("state file after the kill: %v, seq %d; want seq %d (its last write never happened)", err, before.Seq, c.killAt-1)
			}
			o, err := Open(testPlan(), path, OpenOptions{Now: clock})
			var unknown *UnknownStepError
			switch {
			case c.inFlight && (!errors.As(err, &unknown) || unknown.InFlight.StepName != "deploy-app"):
				t.Fatalf("Open: %v, want the deploy in unknown state", err)
			case !c.inFlight && (err != nil || o.State.Seq != c.killAt || o.StartIndex != 2):
				t.Fatalf("Open: %v; want seq %d, start at 2", err, c.killAt)
			}
			if st, err := Read(path); err != nil || st.Seq != c.killAt {
				t.Errorf("state file after Open: %v, seq %d; want %d", err, st.Seq, c.killAt)
			}
			if !strings.Contains(notice.String(), "rebuilt it from the journal") {
				t.Errorf("notice %q", notice)
			}
		})
	}
}

// TestResumeContinuesTheJournalsSequence: a safe step's start is in the journal but never in
// the state file. An executor killed during that step leaves the file one seq behind the
// journal; Open takes the seq from the journal without rewriting the file or saying
// anything (nothing the file holds was lost), so the resumed run's transitions continue the
// journal's sequence instead of reusing a seq it already holds.
func TestResumeContinuesTheJournalsSequence(t *testing.T) {
	notice := captureNotice(t)
	path := filepath.Join(t.TempDir(), "demo.state.json")
	fr := recordDemo(t, path, nil)
	id := fr.State.RunID
	started := func(seq int64) engine.Transition {
		return engine.Transition{RunID: id, Seq: seq, Kind: engine.TransitionStepStarted, Time: day, StepIndex: 2, StepName: "confirm-app", StepType: "confirm", RunStatus: engine.RunInProgress}
	}
	if err := fr.Record(t.Context(), started(6)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	o, err := Open(testPlan(), path, OpenOptions{Now: clock})
	if err != nil || o.State.Seq != 6 || o.StartIndex != 2 {
		t.Fatalf("Open: %v, seq %d, start %d; want seq 6 (the journal's), start 2", err, o.State.Seq, o.StartIndex)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) || notice.Len() != 0 {
		t.Errorf("the state file was rewritten (%v) or a notice given (%q) for a transition it never holds", !bytes.Equal(before, after), notice)
	}
	next := &FileRecorder{Path: path, State: o.State}
	if err := next.Record(t.Context(), started(7)); err != nil {
		t.Fatal(err)
	}
	_, ts, _, err := ReadJournal(JournalPath(path, id))
	if err != nil || len(ts) != 7 {
		t.Fatalf("journal: %v, %d transitions", err, len(ts))
	}
	for i, tr := range ts {
		if tr.Seq != int64(i+1) {
			t.Errorf("journal line %d holds seq %d, want %d", i+2, tr.Seq, i+1)
		}
	}
}

// TestLostPlaybookStateFileIsRecoveredFromTheJournal: a playbook run's state holds what no
// transition carries (its inputs, the playbook path); rebuilt from the journal alone (the
// state file cut to nothing), it comes from the journal's header, and the node outputs and
// counts from the transitions, byte for byte the file the executor wrote.
func TestLostPlaybookStateFileIsRecoveredFromTheJournal(t *testing.T) {
	notice := captureNotice(t)
	path := filepath.Join(t.TempDir(), "diamond.playbook.state.json")
	plan := testPlaybookPlan()
	o, err := OpenPlaybook(plan, path, PlaybookOpenOptions{PlaybookPath: plan.Path, Inputs: map[string]any{"version": "1.2"}})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State}
	id := o.State.RunID
	ev := &engine.Evidence{StepName: "a", Type: "deterministic", Output: `{"built": "app-1.2"}`, Status: engine.StatusPass, TimestampUTC: "2026-01-01T00:00:03.000000000Z"}
	for _, x := range []engine.Transition{
		{RunID: id, Seq: 1, Kind: engine.TransitionRunStarted, StepIndex: -1, RunStatus: engine.RunInProgress},
		tr(2, engine.TransitionStepStarted, 0, "a", nil),
		tr(3, engine.TransitionStepFinished, 0, "a", ev),
	} {
		x.RunID = id
		if err := fr.Record(t.Context(), x); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := os.ReadFile(path)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	o, err = OpenPlaybook(plan, path, PlaybookOpenOptions{PlaybookPath: plan.Path})
	if err != nil {
		t.Fatalf("OpenPlaybook after the lost write: %v", err)
	}
	if !o.Resumed || o.State.Seq != 3 || o.State.Inputs["version"] != "1.2" || o.State.IterationCounts["a"] != 1 || len(o.State.InFlightNodes) != 0 {
		t.Fatalf("OpenPlaybook: resumed %v, seq %d, inputs %v, counts %v, in flight %v", o.Resumed, o.State.Seq, o.State.Inputs, o.State.IterationCounts, o.State.InFlightNodes)
	}
	if b, _ := o.State.Bindings["a"].(map[string]any); b["built"] != "app-1.2" {
		t.Errorf("binding of node a: %v", o.State.Bindings["a"])
	}
	if disk, _ := os.ReadFile(path); !bytes.Equal(disk, last) {
		t.Errorf("rebuilt state file differs from the one the executor wrote:\n%s\n----\n%s", disk, last)
	}
	if !strings.Contains(notice.String(), "could not be read (the file is empty)") {
		t.Errorf("notice %q", notice)
	}
}

// TestReadersSeeTheFinalRunTheJournalHolds: when the run's last transition reached the
// journal but the state file's rewrite was lost, the file as read says the run is unfinished
// while the journal says it ended. ReadRecovered (what a reader holding the lock uses: the
// final-outbox rule, the post step) sees it ended, as Open would, and rewrites the file;
// ReadCurrent (status, a cancel's prompt, resume's checks: no lock) sees it ended too and
// leaves the file as it is.
func TestReadersSeeTheFinalRunTheJournalHolds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		read      func(string) (*State, error)
		rewritten bool
	}{
		{"ReadRecovered", ReadRecovered, true},
		{"ReadCurrent", ReadCurrent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notice := captureNotice(t)
			path := filepath.Join(t.TempDir(), "demo.state.json")
			fr := recordDemo(t, path, nil)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			end := engine.Transition{RunID: fr.State.RunID, Seq: fr.State.Seq + 1, Kind: engine.TransitionRunFinished, Time: clock().Add(time.Minute),
				StepIndex: -1, RunStatus: engine.RunCompleted}
			if err := fr.Record(t.Context(), end); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, before, 0o600); err != nil { // the final rewrite lost
				t.Fatal(err)
			}
			evPath := EvidencePath(path, fr.State.RunID)
			if err := os.Remove(evPath); err != nil { // and the pack written just before it
				t.Fatal(err)
			}
			if st, err := Read(path); err != nil || st.RunStatus.Final() {
				t.Fatalf("Read: %v, %v; want the unfinished run the file holds", st, err)
			}
			st, err := tc.read(path)
			if err != nil || st.RunStatus != engine.RunCompleted || st.Seq != end.Seq {
				t.Fatalf("%s: %+v, %v; want COMPLETED at seq %d", tc.name, st, err, end.Seq)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if changed := !bytes.Equal(before, after); changed != tc.rewritten {
				t.Errorf("state file rewritten: %v; want %v", changed, tc.rewritten)
			}
			if said := notice.Len() > 0; said != tc.rewritten {
				t.Errorf("recovery notice %q; want one only when the file is rewritten", notice.String())
			}
			// No final state file without its evidence pack: the rebuilt file comes with it.
			pack, err := os.ReadFile(evPath)
			if want, _ := EvidencePackJSON(st.EvidencePack); tc.rewritten && (err != nil || !bytes.Equal(pack, want)) {
				t.Errorf("the rebuilt final run's evidence pack: %v\n%s\nwant\n%s", err, pack, want)
			} else if !tc.rewritten && err == nil {
				t.Errorf("a reader without the lock wrote the evidence pack")
			}
		})
	}
}

// TestJournalReservesSpaceAheadOfItsLines: while a run goes on its journal ends in NUL bytes
// reserved for the next lines (so most fdatasyncs leave the file's size alone); readers take
// them for no line, a resume that reopens the journal cuts them off and goes on right after
// the last line, and the journal of a final run ends with its last line.
func TestJournalReservesSpaceAheadOfItsLines(t *testing.T) {
	path, jp, _ := recordedDemo(t)
	data, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.TrimRight(data, "\x00")
	if len(lines) == len(data) || !bytes.HasSuffix(lines, []byte("\n")) || bytes.IndexByte(lines, 0) >= 0 {
		t.Fatalf("journal of a running run: %d bytes of lines, %d in all; want whole lines, then NUL bytes only", len(lines), len(data))
	}
	if _, ts, end, err := ReadJournal(jp); err != nil || len(ts) != 5 || end != int64(len(lines)) {
		t.Fatalf("ReadJournal: %v, %d transitions, end %d; want 5 ending at %d", err, len(ts), end, len(lines))
	}

	// The executor was killed here; the resume opens the run and appends.
	o, err := Open(testPlan(), path, OpenOptions{Now: clock})
	if err != nil || o.State.Seq != 5 {
		t.Fatalf("Open: %v, seq %d", err, o.State.Seq)
	}
	next := &FileRecorder{Path: path, State: o.State}
	at := day.Add(6 * time.Second)
	in := "remediation/a.json"
	for _, tr := range []engine.Transition{
		{RunID: o.State.RunID, Seq: 6, Kind: engine.TransitionStepStarted, Time: at, StepIndex: 2, StepName: "confirm-app", StepType: "confirm", RunStatus: engine.RunInProgress},
		{RunID: o.State.RunID, Seq: 7, Kind: engine.TransitionStepFinished, Time: at, StepIndex: 2, StepName: "confirm-app", StepType: "confirm", RunStatus: engine.RunInProgress,
			Evidence: &engine.Evidence{StepName: "confirm-app", Type: "confirm", Input: &in, Status: engine.StatusPass, TimestampUTC: engine.FormatTime(at)}},
		{RunID: o.State.RunID, Seq: 8, Kind: engine.TransitionRunFinished, Time: at, StepIndex: -1, RunStatus: engine.RunCompleted},
	} {
		if err := next.Record(t.Context(), tr); err != nil {
			t.Fatal(err)
		}
	}
	data, err = os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(data, 0) >= 0 || !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("journal of the final run holds NUL bytes or does not end with a line:\n%q", data)
	}
	h, ts, end, err := ReadJournal(jp)
	if err != nil || h.RunID != o.State.RunID || len(ts) != 8 || end != int64(len(data)) {
		t.Fatalf("final journal: %v, %d transitions", err, len(ts))
	}
	for i, tr := range ts {
		if tr.Seq != int64(i+1) {
			t.Fatalf("line %d holds seq %d", i+2, tr.Seq)
		}
	}
}

// TestAFailedJournalAppendWritesNothingMore: once an append to the journal fails (a full
// disk, an I/O error; here the journal cannot be opened), or the fdatasync that makes appends
// durable does, the State holds a transition the journal may not hold durably, so the
// recorder writes nothing more — even when the disk would take the next line again, which
// would leave a hole in the journal and a state file claiming a transition no journal line
// backs. The state file stays as the last good flush left it, the journal gets no line after
// the failure, and a resume goes on from what the journal holds.
func TestAFailedJournalAppendWritesNothingMore(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fail makes fr's next journal write (append) or sync fail and returns a func that
		// lets the disk take writes again; wantSeq is the seq a resume then goes on from.
		fail    func(t *testing.T, fr *FileRecorder, start engine.Transition) (recover func())
		wantSeq int64
	}{
		{"an append fails", func(t *testing.T, fr *FileRecorder, start engine.Transition) func() {
			jp := fr.journal.path
			fr.journal.close()
			fr.journal.path = filepath.Join(t.TempDir(), "gone", "journal") // the next open fails
			var nw *NotWritableError
			if err := fr.Append(t.Context(), start); !errors.As(err, &nw) {
				t.Fatalf("Append with the journal unwritable = %v, want *NotWritableError", err)
			}
			return func() { fr.journal.path = jp }
		}, 5},
		{"a sync fails", func(t *testing.T, fr *FileRecorder, start engine.Transition) func() {
			if err := fr.Append(t.Context(), start); err != nil {
				t.Fatal(err)
			}
			fr.journal.f.Close() // the fdatasync of the flush fails
			var nw *NotWritableError
			if err := fr.Flush(t.Context()); !errors.As(err, &nw) {
				t.Fatalf("Flush with the journal's sync failing = %v, want *NotWritableError", err)
			}
			return func() {}
		}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, jp, fr := recordedDemo(t)
			stateBefore, _ := os.ReadFile(path)
			start := engine.Transition{RunID: fr.State.RunID, Seq: 6, Kind: engine.TransitionGateOpened, Time: day, StepIndex: 2, StepName: "confirm-app", StepType: "confirm", RunStatus: engine.RunInProgress}
			tc.fail(t, fr, start)() // and the disk takes writes again
			journalBefore, _ := os.ReadFile(jp)
			var nw *NotWritableError
			finish := engine.Transition{RunID: fr.State.RunID, Seq: 7, Kind: engine.TransitionStepFinished, Time: day, StepIndex: 2, StepName: "confirm-app", StepType: "confirm", RunStatus: engine.RunInProgress}
			if err := fr.Append(t.Context(), finish); !errors.As(err, &nw) {
				t.Errorf("Append after the failure = %v, want *NotWritableError", err)
			}
			if err := fr.Flush(t.Context()); !errors.As(err, &nw) {
				t.Errorf("Flush after the failure = %v, want *NotWritableError", err)
			}
			fr.acked = true // an acknowledgement would have the state file written
			if err := fr.Sync(); !errors.As(err, &nw) {
				t.Errorf("Sync after the failure = %v, want *NotWritableError", err)
			}
			if fr.Recorded() {
				t.Error("Recorded() after the failure = true")
			}
			if after, _ := os.ReadFile(jp); !bytes.Equal(after, journalBefore) {
				t.Errorf("the journal changed after the failure:\n%s", bytes.TrimRight(after, "\x00"))
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, stateBefore) {
				t.Errorf("the state file changed after the failure:\n%s", after)
			}
			o, err := Open(testPlan(), path, OpenOptions{Now: clock})
			if err != nil {
				t.Fatalf("Open after the failure: %v", err)
			}
			if o.State.Seq != tc.wantSeq {
				t.Fatalf("Open after the failure: seq %d; want seq %d (no hole, nothing past the journal)", o.State.Seq, tc.wantSeq)
			}
		})
	}
}

// TestALineBeingAppendedReadsAsNotYetWritten: a line is written into the NUL bytes reserved
// ahead of it, and a reader (or a crash that kept only some of its pages) can find its end,
// newline included, before its start. Such a line was never made durable: the journal reads
// as if it were not there yet, a resume goes on from the line before, and the next append
// replaces it with a whole line.
func TestALineBeingAppendedReadsAsNotYetWritten(t *testing.T) {
	path, jp, fr := recordedDemo(t)
	start := engine.Transition{RunID: fr.State.RunID, Seq: 6, Kind: engine.TransitionStepStarted, Time: day, StepIndex: 2, StepName: "confirm-app", StepType: "confirm", RunStatus: engine.RunInProgress}
	line, err := journalLine(start)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(jp, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := int64(len(line) / 2)
	if _, err := f.WriteAt(line[half:], fr.journal.off+half); err != nil { // its second half only
		t.Fatal(err)
	}
	f.Close()
	h, ts, end, err := ReadJournal(jp)
	if err != nil || h.RunID != fr.State.RunID || len(ts) != 5 || end != fr.journal.off {
		t.Fatalf("ReadJournal with a half-written line: %v, %d transitions, end %d; want 5 transitions, end %d", err, len(ts), end, fr.journal.off)
	}
	o, err := Open(testPlan(), path, OpenOptions{Now: clock})
	if err != nil || o.State.Seq != 5 || o.StartIndex != 2 {
		t.Fatalf("Open: %v, seq %d, start %d; want seq 5, start 2", err, o.State.Seq, o.StartIndex)
	}
	next := &FileRecorder{Path: path, State: o.State}
	if err := next.Record(t.Context(), start); err != nil {
		t.Fatal(err)
	}
	if _, ts, _, err := ReadJournal(jp); err != nil || len(ts) != 6 || ts[5].Seq != 6 || ts[5].StepName != "confirm-app" {
		t.Fatalf("journal after the next append: %v, %d transitions", err, len(ts))
	}
}
