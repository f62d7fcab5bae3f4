package server

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Request limits documented in run_service.proto.
const (
	maxRunIDBytes  = 128
	maxReasonBytes = 1024
)

var (
	runbookNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) // DESIGN D6
	planDigestRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	schemaHash8RE = regexp.MustCompile(`^[0-9a-f]{8}$`)
)

// Run-finishing sources recorded on gates closed because their run ended.
const sourceRunFinished = "run-finished"

// runService implements rbookv1connect.RunServiceHandler.
type runService struct{ s *Server }

// identity is the authenticated caller's identity, else what the request claims, else
// fallback (auth off: loopback laptop mode).
func identity(ctx context.Context, claimed, fallback string) string {
	if c, ok := CallerFrom(ctx); ok {
		return c.Identity
	}
	if claimed != "" {
		return claimed
	}
	return fallback
}

func (h runService) StartRun(ctx context.Context, req *rbookv1.StartRunRequest) (*rbookv1.StartRunResponse, error) {
	switch {
	case req.GetRunId() == "":
		return nil, invalidArg("run_id is required")
	case len(req.GetRunId()) > maxRunIDBytes:
		return nil, invalidArg("run_id is %d bytes, over the limit of %d", len(req.GetRunId()), maxRunIDBytes)
	case !runbookNameRE.MatchString(req.GetRunbookName()):
		return nil, invalidArg("runbook_name %q must match [A-Za-z0-9._-]{1,64}", truncate(req.GetRunbookName(), 80))
	case !planDigestRE.MatchString(req.GetPlanDigest()):
		return nil, invalidArg("plan_digest must be 64 lowercase hex characters (SHA-256)")
	case !schemaHash8RE.MatchString(req.GetSchemaHash8()):
		return nil, invalidArg("schema_hash8 must be 8 lowercase hex characters")
	case req.GetTotalSteps() < 1:
		return nil, invalidArg("total_steps is %d, must be >= 1", req.GetTotalSteps())
	case req.GetStartedAt() != nil && req.GetStartedAt().CheckValid() != nil:
		return nil, invalidArg("started_at is not a valid timestamp")
	}
	nr := store.NewRun{
		RunID: req.GetRunId(), PlaybookName: req.GetRunbookName(), PlaybookHash: req.GetPlanDigest(),
		SchemaHash8: req.GetSchemaHash8(), TotalSteps: int(req.GetTotalSteps()), StartedBy: identity(ctx, req.GetStartedBy(), ""),
		// A resume (idempotent) of a run whose runbook was edited adopts the new plan digest;
		// the store closes the gates bound to the old one in the same transaction, so their
		// tokens stop working at once (DESIGN D9, case A03.6). A refused call changes nothing.
		AdoptPlan: req.GetIdempotent(),
	}
	if req.GetStartedAt() != nil {
		nr.StartedAt = req.GetStartedAt().AsTime()
	}
	run, created, err := h.s.st.StartRun(ctx, nr)
	if err != nil {
		return nil, h.s.storeError(ctx, "StartRun", err)
	}
	if !created {
		switch {
		case run.Status.Final():
			return nil, rpcError(connect.CodeFailedPrecondition, CodeRunFinal,
				"run %s is already %s; start the next run id (suffix .2, .3, …)", run.RunID, run.Status)
		case !req.GetIdempotent():
			return nil, rpcError(connect.CodeAlreadyExists, CodeRunExists, "run %s already exists", run.RunID)
		}
	}
	return &rbookv1.StartRunResponse{Run: runToProto(run, h.s.hub.effective(run)), Created: created}, nil
}

func (h runService) RecordTransition(ctx context.Context, req *rbookv1.RecordTransitionRequest) (*rbookv1.RecordTransitionResponse, error) {
	t, err := transitionFromProto(req.GetTransition())
	if err != nil {
		return nil, err
	}
	res, err := h.s.st.RecordTransition(ctx, t)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", t.RunID)
	case errors.Is(err, store.ErrConflict):
		return nil, rpcError(connect.CodeAlreadyExists, CodeSeqConflict,
			"run %s already has a different transition with seq %d", t.RunID, t.Seq)
	case errors.Is(err, store.ErrOutOfOrder):
		return nil, rpcError(connect.CodeFailedPrecondition, CodeSeqGap, "%s; send the missing transitions first",
			storeMessage(err, store.ErrOutOfOrder))
	case errors.Is(err, store.ErrRunFinal):
		return nil, h.s.finalRunError(ctx, t.RunID)
	case err != nil:
		return nil, h.s.storeError(ctx, "RecordTransition", err)
	}
	if st := res.Progress.Status; st.Final() {
		source, reason := sourceRunFinished, "closed: the run finished ("+string(st)+")"
		if st == store.RunCancelled {
			source, reason = store.SourceCancelRun, "closed: the run was cancelled"
		}
		if err := h.s.closeGates(ctx, t.RunID, source, reason); err != nil {
			return nil, err
		}
		if st == store.RunCancelled && t.RunStatus != store.ExecCancelled {
			// Stored for the record (an executor winding down), but the executor must stop.
			return nil, rpcError(connect.CodeFailedPrecondition, CodeRunCancelled,
				"run %s was cancelled; transition %d was stored for the record and the run must stop", t.RunID, t.Seq)
		}
	}
	return &rbookv1.RecordTransitionResponse{Duplicate: res.Duplicate, LastSeq: res.Progress.LastSeq}, nil
}

// finalRunError explains why a final run refused a change (E_RUN_CANCELLED or E_RUN_FINAL).
func (s *Server) finalRunError(ctx context.Context, runID string) error {
	run, _, err := s.st.GetRun(ctx, runID)
	if err != nil {
		return s.storeError(ctx, "reading a final run", err)
	}
	if run.Status == store.RunCancelled {
		return rpcError(connect.CodeFailedPrecondition, CodeRunCancelled, "run %s was cancelled", runID)
	}
	return rpcError(connect.CodeFailedPrecondition, CodeRunFinal, "run %s is already %s", runID, run.Status)
}

// closeGates closes the run's pending approvals as cancelled with source, so their tokens
// stop working. Each is one compare-and-set; a gate decided meanwhile is left as decided.
func (s *Server) closeGates(ctx context.Context, runID, source, reason string) error {
	page, err := s.st.ListApprovals(ctx, store.ApprovalFilter{Status: store.ApprovalPending, RunID: runID, PageSize: store.MaxPageSize})
	if err != nil {
		return s.storeError(ctx, "listing pending gates", err)
	}
	for _, a := range page.Approvals {
		_, err := s.st.DecideApproval(ctx, store.Decision{ApprovalID: a.ApprovalID, Verdict: store.ApprovalCancelled,
			Approver: "system", Reason: reason, Source: source})
		if err != nil && !errors.Is(err, store.ErrAlreadyDecided) {
			return s.storeError(ctx, "closing a gate", err)
		}
	}
	return nil
}

func (h runService) GetRun(ctx context.Context, req *rbookv1.GetRunRequest) (*rbookv1.GetRunResponse, error) {
	if req.GetRunId() == "" {
		return nil, invalidArg("run_id is required")
	}
	run, ts, err := h.s.st.GetRun(ctx, req.GetRunId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
	}
	if err != nil {
		return nil, h.s.storeError(ctx, "GetRun", err)
	}
	out := &rbookv1.GetRunResponse{Run: runToProto(run, h.s.hub.effective(run)), Transitions: make([]*rbookv1.Transition, len(ts))}
	for i, t := range ts {
		out.Transitions[i] = transitionToProto(t)
	}
	return out, nil
}

func (h runService) ListRuns(ctx context.Context, req *rbookv1.ListRunsRequest) (*rbookv1.ListRunsResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, invalidArg("page_size is %d, must be >= 0", req.GetPageSize())
	}
	f := store.RunFilter{PlaybookName: req.GetRunbookName(), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	if req.GetStatus() != rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED {
		st, ok := runStatusFromProto[req.GetStatus()]
		if !ok {
			return nil, invalidArg("status %d is not a RUN_STATUS_* value", req.GetStatus())
		}
		f.Status = st
	}
	page, err := h.s.st.ListRuns(ctx, f)
	if err != nil {
		return nil, h.s.storeError(ctx, "ListRuns", err)
	}
	out := &rbookv1.ListRunsResponse{NextPageToken: page.NextPageToken, Runs: make([]*rbookv1.Run, 0, len(page.Runs))}
	for _, r := range page.Runs {
		p := runToProto(r, h.s.hub.effective(r))
		// The filter applies to the stored status; a row whose gate state says otherwise is
		// left out rather than shown under the wrong filter (pages may be short).
		if f.Status != "" && p.GetStatus() != req.GetStatus() {
			continue
		}
		out.Runs = append(out.Runs, p)
	}
	return out, nil
}

func (h runService) CancelRun(ctx context.Context, req *rbookv1.CancelRunRequest) (*rbookv1.CancelRunResponse, error) {
	switch {
	case req.GetRunId() == "":
		return nil, invalidArg("run_id is required")
	case len(req.GetReason()) > maxReasonBytes:
		return nil, invalidArg("reason is %d bytes, over the limit of %d", len(req.GetReason()), maxReasonBytes)
	}
	run, err := h.s.st.CancelRun(ctx, req.GetRunId(), identity(ctx, "", "anonymous"), req.GetReason(), time.Time{})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
	case errors.Is(err, store.ErrRunFinal):
		cur, _, gerr := h.s.st.GetRun(ctx, req.GetRunId())
		if gerr != nil {
			return nil, h.s.storeError(ctx, "CancelRun", gerr)
		}
		if cur.Status != store.RunCancelled {
			return nil, rpcError(connect.CodeFailedPrecondition, CodeRunFinal, "run %s already %s; it cannot be cancelled", cur.RunID, cur.Status)
		}
		run = cur // cancelling a cancelled run returns it unchanged
	case err != nil:
		return nil, h.s.storeError(ctx, "CancelRun", err)
	}
	return &rbookv1.CancelRunResponse{Run: runToProto(run, h.s.hub.effective(run))}, nil
}

// evidenceJSON is one entry of evidence_pack_json: exactly the seed's fields and order
// (seed runbook-executor, Step 7).
type evidenceJSON struct {
	StepName     string  `json:"step_name"`
	Type         string  `json:"type"`
	Input        *string `json:"input"`
	Output       string  `json:"output"`
	Status       string  `json:"status"`
	TimestampUTC string  `json:"timestamp_utc"`
}

func (h runService) GetEvidencePack(ctx context.Context, req *rbookv1.GetEvidencePackRequest) (*rbookv1.GetEvidencePackResponse, error) {
	if req.GetRunId() == "" {
		return nil, invalidArg("run_id is required")
	}
	_, ts, err := h.s.st.GetRun(ctx, req.GetRunId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
	}
	if err != nil {
		return nil, h.s.storeError(ctx, "GetEvidencePack", err)
	}
	out := &rbookv1.GetEvidencePackResponse{Entries: []*rbookv1.Evidence{}}
	pack := []evidenceJSON{}
	for _, t := range ts {
		if t.Evidence == nil {
			continue
		}
		e := evidenceToProto(*t.Evidence)
		out.Entries = append(out.Entries, e)
		pack = append(pack, evidenceJSON{StepName: e.StepName, Type: e.Type, Input: e.Input, Output: e.Output,
			Status: string(t.Evidence.Status), TimestampUTC: e.TimestampUtc})
	}
	b, err := json.MarshalIndent(pack, "", "  ")
	if err != nil {
		return nil, h.s.storeError(ctx, "GetEvidencePack", err)
	}
	out.EvidencePackJson = string(b)
	return out, nil
}
