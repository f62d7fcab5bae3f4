package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/internal/atomicfile"
)

// The retention loop's pace (docs/backup.md, "Retention"): a pass deletes batches of
// RetentionBatch runs, one transaction each, with RetentionPause between them so the
// database's writer serves other requests meanwhile; passes start RetentionEvery apart.
const (
	RetentionBatch = store.DefaultPruneBatch
	RetentionPause = time.Second
	RetentionEvery = time.Hour
)

// ExportFormat names the layout of a retention export file (docs/backup.md, "Export format").
const ExportFormat = "rbook.run-export.v1"

// RetentionOptions turns the retention loop on (rbook serve --retention).
type RetentionOptions struct {
	// Age: finished runs whose end is older than this are pruned. It must be positive.
	Age time.Duration
	// ExportDir, when set, receives one JSON file per run (ExportFormat) before the run is
	// deleted; a run whose file could not be written is kept and tried again the next pass.
	ExportDir string
	// Batch, Pause and Every override RetentionBatch, RetentionPause and RetentionEvery (tests).
	Batch        int
	Pause, Every time.Duration
}

// RunExport is one retention export file: the run, its transitions and its approvals (with
// their votes) as GetRun and ListApprovals show them, each in the protobuf JSON mapping.
type RunExport struct {
	Format      string            `json:"format"`
	ExportedAt  time.Time         `json:"exported_at"`
	Run         json.RawMessage   `json:"run"`
	Transitions []json.RawMessage `json:"transitions"`
	Approvals   []json.RawMessage `json:"approvals"`
	// Attestation is the run's signed DSSE envelope (docs/attestations.md), absent when none
	// was signed; each approval carries its own as review_attestation_json.
	Attestation json.RawMessage `json:"attestation,omitempty"`
}

// startRetention starts the retention loop when opts.Retention is set; done closes when it
// ended (ctx cancelled by Close).
func (s *Server) startRetention(ctx context.Context) {
	r := s.opts.Retention
	if r == nil || r.Age <= 0 {
		return
	}
	every := r.Every
	if every <= 0 {
		every = RetentionEvery
	}
	s.retentionDone = make(chan struct{})
	go func() {
		defer close(s.retentionDone)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			s.prunePass(ctx, time.Now())
			timer.Reset(every)
		}
	}()
}

// prunePass prunes, batch by batch, every finished run that ended before now minus the
// retention age (store.PruneRuns: never one that is not final or whose gate waits), exports
// each first when an export folder is set, logs what it did and returns how many runs it
// deleted. Errors are logged; the next pass tries again.
func (s *Server) prunePass(ctx context.Context, now time.Time) int {
	r := s.opts.Retention
	batch, pause := r.Batch, r.Pause
	if batch <= 0 {
		batch = RetentionBatch
	}
	if pause <= 0 {
		pause = RetentionPause
	}
	opts := store.PruneOptions{Before: now.Add(-r.Age), Limit: batch}
	if r.ExportDir != "" {
		opts.Export = s.exportRun
	}
	total, skipped := 0, 0
	for {
		res, err := s.st.PruneRuns(ctx, opts)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
				s.log.Error("pruning old runs failed", "err", err)
			}
			break
		}
		if res.Busy {
			s.log.Debug("another replica is pruning old runs")
			break
		}
		for _, e := range res.ExportErrors {
			s.log.Error("exporting a run before pruning it failed; the run is kept", "err", e)
		}
		total += len(res.Pruned)
		skipped += len(res.Skipped)
		s.countPruned(len(res.Pruned))
		if !res.More {
			break
		}
		opts.After = res.Next
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return total
		case <-t.C:
		}
	}
	if total > 0 || skipped > 0 {
		args := []any{"pruned", total, "kept_after_failed_export", skipped, "retention", r.Age.String(), "ended_before", opts.Before.UTC().Format(time.RFC3339)}
		if at, ok, err := s.st.OldestRun(ctx); err == nil && ok {
			args = append(args, "oldest_kept_started_at", at.UTC().Format(time.RFC3339))
		}
		s.log.Info("old runs pruned", args...)
	}
	if testHookPrunePass != nil {
		testHookPrunePass(total)
	}
	return total
}

// testHookPrunePass, when set (tests, SetPrunePassHook), is called at the end of each pass
// with the number of runs it pruned.
var testHookPrunePass func(pruned int)

// exportRun writes rec to <ExportDir>/<run id>.json (ExportFileName) atomically, mode 0600.
func (s *Server) exportRun(_ context.Context, rec store.RunRecord) error {
	out := RunExport{Format: ExportFormat, ExportedAt: time.Now().UTC(), Transitions: []json.RawMessage{}, Approvals: []json.RawMessage{}}
	var err error
	if out.Run, err = protoJSON(runToProto(rec.Run, runStatusToProto[rec.Run.Status])); err != nil {
		return err
	}
	for _, t := range rec.Transitions {
		b, err := protoJSON(transitionToProto(t))
		if err != nil {
			return err
		}
		out.Transitions = append(out.Transitions, b)
	}
	reviews := map[string]string{}
	for _, a := range rec.Attestations {
		if a.ApprovalID == "" {
			out.Attestation = json.RawMessage(a.Envelope)
		} else {
			reviews[a.ApprovalID] = string(a.Envelope)
		}
	}
	for _, a := range rec.Approvals {
		p := s.approvalToProto(a)
		p.ReviewAttestationJson = reviews[a.ApprovalID]
		b, err := protoJSON(p)
		if err != nil {
			return err
		}
		out.Approvals = append(out.Approvals, b)
	}
	body, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(s.opts.Retention.ExportDir, ExportFileName(rec.Run.RunID)), append(body, '\n'), 0o600)
}

func protoJSON(m proto.Message) (json.RawMessage, error) {
	return protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
}

// ExportFileName is the export file of run id: the id with every byte outside
// [A-Za-z0-9._-] written as %XX (so no id names a path outside the folder), then ".json".
func ExportFileName(runID string) string {
	var b strings.Builder
	for i := 0; i < len(runID); i++ {
		c := runID[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (c == '.' && i > 0) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String() + ".json"
}

// countPruned counts runs deleted by retention in rbook_runs_pruned_total (docs/metrics.md;
// docs/backup.md, "Retention").
func (s *Server) countPruned(runs int) {
	s.metrics.RunsPruned(runs)
	if runs > 0 {
		s.log.Debug("retention batch", "pruned", runs)
	}
}
