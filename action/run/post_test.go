package run

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
)

// TestPostSeesARunTheJournalShowsFinished: the job was killed after the run's last transition
// reached the journal and before the state file's rewrite. The post step reads the run as
// the journal shows it: finished, so nothing is withdrawn and no interruption is recorded
// over the run's end.
func TestPostSeesARunTheJournalShowsFinished(t *testing.T) {
	o, term := gateOptions(t)
	deploy := 1
	o.StepIndex = &deploy // past the gate: the run completes with nobody at the terminal
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if term.finished == nil || term.finished.RunStatus != engine.RunCompleted {
		t.Fatalf("the run ended %+v; want COMPLETED (it starts past its gate)", term.finished)
	}
	// The last rewrite lost: the state file as the journal's transitions before the last one
	// make it.
	h, ts, _, err := state.ReadJournal(state.JournalPath(o.Plan.StateFilePath, term.finished.RunID))
	if err != nil || len(ts) < 2 || ts[len(ts)-1].Kind != engine.TransitionRunFinished {
		t.Fatalf("journal: %v, %d transitions; want the run's, run_finished last", err, len(ts))
	}
	before := *h.State
	for _, tr := range ts[:len(ts)-1] {
		if err := state.Apply(&before, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := state.Write(o.Plan.StateFilePath, &before); err != nil {
		t.Fatal(err)
	}
	var errw bytes.Buffer
	tgt := PostTarget{Name: "gate", StatePath: o.Plan.StateFilePath, Resume: "rbook run gate", Final: func(st *state.State) string { return string(st.RunStatus) }}
	if err := o.Config.Post(context.Background(), tgt, &bytes.Buffer{}, &errw); err != nil {
		t.Fatalf("Post = %v\n%s", err, errw.String())
	}
	if want := "is COMPLETED; nothing to withdraw"; !strings.Contains(errw.String(), want) {
		t.Errorf("post said %q; want it to say %q", errw.String(), want)
	}
	st, err := state.Read(o.Plan.StateFilePath)
	if err != nil || st.RunStatus != engine.RunCompleted || st.Interrupted != nil || st.Seq != term.finished.Seq {
		t.Fatalf("state file after post: %+v, %v; want COMPLETED at seq %d with no interruption", st, err, term.finished.Seq)
	}
}
