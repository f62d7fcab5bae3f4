package server

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

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

// ownerIDRE is the shape of an executor's owner id (StartRunRequest.owner_id).
var ownerIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)

// fenceOf is the lease fence of an executor's write: its owner id and epoch and, when the
// caller is an authenticated executor, its identity (DESIGN D12-D13; issue 6, item 1.3).
func fenceOf(ctx context.Context, ownerID string, epoch int64) (store.Fence, error) {
	if !ownerIDRE.MatchString(ownerID) {
		return store.Fence{}, invalidArg("owner_id is required: the 16-128 characters of [A-Za-z0-9_-] this executor gave StartRun")
	}
	if epoch < 1 {
		return store.Fence{}, invalidArg("epoch is %d; send the lease epoch StartRun returned (>= 1)", epoch)
	}
	f := store.Fence{OwnerIDHash: store.OwnerIDHash(ownerID), Epoch: epoch}
	if c, ok := CallerFrom(ctx); ok && c.Role == RoleExecutor {
		f.Identity = c.Identity
	}
	return f, nil
}

func (h runService) StartRun(ctx context.Context, req *rbookv1.StartRunRequest) (*rbookv1.StartRunResponse, error) {
	switch {
	case req.GetRunId() == "":
		return nil, invalidArg("run_id is required")
	case len(req.GetRunId()) > maxRunIDBytes:
		return nil, invalidArg("run_id is %d bytes, over the limit of %d", len(req.GetRunId()), maxRunIDBytes)
	case !runbookNameRE.MatchString(req.GetName()):
		return nil, invalidArg("name %q must match [A-Za-z0-9._-]{1,64}", truncate(req.GetName(), 80))
	case !planDigestRE.MatchString(req.GetContentHash()):
		return nil, invalidArg("content_hash must be 64 lowercase hex characters (SHA-256)")
	case !schemaHash8RE.MatchString(req.GetSchemaHash8()):
		return nil, invalidArg("schema_hash8 must be 8 lowercase hex characters")
	case req.GetTotalSteps() < 1:
		return nil, invalidArg("total_steps is %d, must be >= 1", req.GetTotalSteps())
	case req.GetStartedAt() != nil && req.GetStartedAt().CheckValid() != nil:
		return nil, invalidArg("started_at is not a valid timestamp")
	case !ownerIDRE.MatchString(req.GetOwnerId()):
		return nil, invalidArg("owner_id is required: 16-128 characters of [A-Za-z0-9_-], random per executor instance")
	case req.GetLeaseSeconds() != 0 && (time.Duration(req.GetLeaseSeconds())*time.Second < store.MinLease ||
		time.Duration(req.GetLeaseSeconds())*time.Second > store.MaxLease):
		return nil, invalidArg("lease_seconds is %d, must be 0 (60) or %d..%d", req.GetLeaseSeconds(),
			int(store.MinLease/time.Second), int(store.MaxLease/time.Second))
	}
	if err := validStartBindings(req); err != nil {
		return nil, err
	}
	kind := store.KindRunbook
	switch req.GetKind() {
	case rbookv1.RunKind_RUN_KIND_UNSPECIFIED, rbookv1.RunKind_RUN_KIND_RUNBOOK:
	case rbookv1.RunKind_RUN_KIND_PLAYBOOK:
		kind = store.KindPlaybook
	default:
		return nil, invalidArg("kind %d is not a RUN_KIND_* value", req.GetKind())
	}
	who := identity(ctx, req.GetStartedBy(), "")
	caller, authed := CallerFrom(ctx)
	nr := store.NewRun{
		RunID: req.GetRunId(), PlaybookName: req.GetName(), PlaybookHash: req.GetContentHash(), Kind: kind,
		SchemaHash8: req.GetSchemaHash8(), TotalSteps: int(req.GetTotalSteps()), StartedBy: who,
		OwnerIDHash: store.OwnerIDHash(req.GetOwnerId()), Owner: who, TakeOver: req.GetTakeOver(),
		RequireOwner: authed && caller.Role == RoleExecutor, Lease: time.Duration(req.GetLeaseSeconds()) * time.Second,
		GitHub: githubJobOf(ctx), Reported: workflowRunOf(req.GetReportedWorkflowRun()),
		EpicID: req.GetEpicId(), SessionID: req.GetSessionId(),
	}
	if b := req.GetBindings(); b != "" {
		nr.Bindings = json.RawMessage(b) // the run's first bindings (issue 9, item 4); kept on resume
	}
	if req.GetStartedAt() != nil {
		nr.StartedAt = req.GetStartedAt().AsTime()
	}
	run, outcome, err := h.s.st.StartRun(ctx, nr)
	switch {
	case errors.Is(err, store.ErrRunFinal):
		return nil, rpcError(connect.CodeFailedPrecondition, CodeRunFinal,
			"run %s is already %s; start the next run id (suffix .2, .3, …)", run.RunID, run.Status)
	case errors.Is(err, store.ErrRunOwned):
		return nil, rpcError(connect.CodeAlreadyExists, CodeRunOwned,
			"run %s is owned by another executor (%s, lease epoch %d, until %s); a new run takes the next id suffix, "+
				"and taking this one over needs --take-over after its lease expires",
			run.RunID, ownerName(run.Owner), run.LeaseEpoch, leaseUntil(run.LeaseExpiresAt))
	case errors.Is(err, store.ErrLeaseHeld):
		return nil, rpcError(connect.CodeFailedPrecondition, CodeLeaseHeld,
			"run %s is still leased by %s until %s; take it over after that (if its executor is really gone)",
			run.RunID, ownerName(run.Owner), leaseUntil(run.LeaseExpiresAt))
	case err != nil:
		return nil, h.s.storeError(ctx, "StartRun", err)
	}
	if outcome == store.TookOver {
		h.s.log.InfoContext(ctx, "run taken over", "run_id", run.RunID, "owner", run.Owner, "epoch", run.LeaseEpoch)
	}
	return &rbookv1.StartRunResponse{Run: runToProto(run, h.s.hub.effective(run)), Created: outcome == store.Created}, nil
}

func ownerName(owner string) string {
	if owner == "" {
		return "an executor from before leases"
	}
	return owner
}

func leaseUntil(t time.Time) string {
	if t.IsZero() {
		return "long ago"
	}
	return t.UTC().Format(time.RFC3339)
}

func (h runService) RecordTransition(ctx context.Context, req *rbookv1.RecordTransitionRequest) (*rbookv1.RecordTransitionResponse, error) {
	t, err := transitionFromProto(req.GetTransition())
	if err != nil {
		return nil, err
	}
	fence, err := fenceOf(ctx, req.GetOwnerId(), req.GetEpoch())
	if err != nil {
		return nil, err
	}
	res, err := h.s.st.RecordTransition(ctx, t, fence)
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

func (h runService) RenewLease(ctx context.Context, req *rbookv1.RenewLeaseRequest) (*rbookv1.RenewLeaseResponse, error) {
	if req.GetRunId() == "" {
		return nil, invalidArg("run_id is required")
	}
	fence, err := fenceOf(ctx, req.GetOwnerId(), req.GetEpoch())
	if err != nil {
		return nil, err
	}
	renew := h.s.st.RenewLease
	if req.GetRelease() {
		renew = h.s.st.ReleaseLease // pause mode: the next executor takes over at once (issue 8, item 4)
	}
	p, err := renew(ctx, req.GetRunId(), fence)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
	case errors.Is(err, store.ErrRunFinal):
		return nil, h.s.finalRunError(ctx, req.GetRunId())
	case err != nil:
		return nil, h.s.storeError(ctx, "RenewLease", err)
	}
	return &rbookv1.RenewLeaseResponse{Lease: &rbookv1.RunLease{Owner: p.Owner, Epoch: p.LeaseEpoch, ExpiresAt: ts(p.LeaseExpiresAt)}}, nil
}

// finalRunError explains why a final run refused a change (E_RUN_CANCELLED or E_RUN_FINAL).
func (s *Server) finalRunError(ctx context.Context, runID string) error {
	run, err := s.st.Run(ctx, runID)
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

// MaxResponseBytes bounds the transitions or evidence entries of one GetRun or
// GetEvidencePack page (issue 6, item 1.8): under gRPC's default 4 MiB receive limit with
// room for the run and framing. A page always holds at least one item; one item is at most
// about 1.1 MiB (MaxEvidenceOutputBytes output plus store.MaxTextBytes input).
const MaxResponseBytes = 3 << 20

// maxItemsPage is the default and largest page_size of GetRun and GetEvidencePack.
const maxItemsPage = store.MaxTransitionsPage

// seqPage reads one page of a run's transitions for GetRun and GetEvidencePack: from the
// page token's seq on, at most pageSize items that keep (and add) ending up in the page, and
// no more than MaxResponseBytes of them by size(item). It returns the items kept and the next
// page token ("" after the last transition).
func seqPage[T any](ctx context.Context, s *Server, runID string, pageSize int32, pageToken string,
	keep func(store.Transition) (T, int, bool)) ([]T, string, error) {
	return seqPageBudget(ctx, s, runID, pageSize, pageToken, MaxResponseBytes, keep)
}

// seqPageBudget is seqPage with budget bytes instead of MaxResponseBytes (GetRun leaves room
// for the run it sends with the page); a page still holds at least one item.
func seqPageBudget[T any](ctx context.Context, s *Server, runID string, pageSize int32, pageToken string, budget int,
	keep func(store.Transition) (T, int, bool)) ([]T, string, error) {
	if pageSize < 0 {
		return nil, "", invalidArg("page_size is %d, must be >= 0", pageSize)
	}
	limit := int(pageSize)
	if limit == 0 || limit > maxItemsPage {
		limit = maxItemsPage
	}
	from := int64(1)
	if pageToken != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(pageToken, "seq:"), 10, 64)
		if err != nil || n < 1 || !strings.HasPrefix(pageToken, "seq:") {
			return nil, "", invalidArg("page_token %q is not one this server returned", truncate(pageToken, 40))
		}
		from = n
	}
	var out []T
	size := 0
	for {
		batch, err := s.st.Transitions(ctx, runID, from, maxItemsPage)
		if errors.Is(err, store.ErrNotFound) {
			return nil, "", rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(runID, 140))
		}
		if err != nil {
			return nil, "", s.storeError(ctx, "reading transitions", err)
		}
		for _, t := range batch {
			item, n, ok := keep(t)
			if !ok {
				from = t.Seq + 1
				continue
			}
			if len(out) > 0 && (len(out) == limit || size+n > budget) {
				return out, "seq:" + strconv.FormatInt(t.Seq, 10), nil
			}
			out, size, from = append(out, item), size+n, t.Seq+1
		}
		if len(batch) < maxItemsPage {
			return out, "", nil
		}
	}
}

func (h runService) GetRun(ctx context.Context, req *rbookv1.GetRunRequest) (*rbookv1.GetRunResponse, error) {
	if req.GetRunId() == "" {
		return nil, invalidArg("run_id is required")
	}
	run, err := h.s.st.RunWithNodes(ctx, req.GetRunId()) // a playbook run's node states too
	if errors.Is(err, store.ErrNotFound) {
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
	}
	if err != nil {
		return nil, h.s.storeError(ctx, "GetRun", err)
	}
	shown := runToProto(run, h.s.hub.effective(run))
	// The run (a playbook's bindings and node states) and the page share MaxResponseBytes.
	page, next, err := seqPageBudget(ctx, h.s, req.GetRunId(), req.GetPageSize(), req.GetPageToken(), MaxResponseBytes-proto.Size(shown),
		func(t store.Transition) (*rbookv1.Transition, int, bool) {
			p := transitionToProto(t)
			return p, proto.Size(p), true
		})
	if err != nil {
		return nil, err
	}
	return &rbookv1.GetRunResponse{Run: shown, Transitions: page, NextPageToken: next}, nil
}

func (h runService) ListRuns(ctx context.Context, req *rbookv1.ListRunsRequest) (*rbookv1.ListRunsResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, invalidArg("page_size is %d, must be >= 0", req.GetPageSize())
	}
	f := store.RunFilter{PlaybookName: req.GetName(), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	switch req.GetKind() {
	case rbookv1.RunKind_RUN_KIND_UNSPECIFIED:
	case rbookv1.RunKind_RUN_KIND_RUNBOOK:
		f.Kind = store.KindRunbook
	case rbookv1.RunKind_RUN_KIND_PLAYBOOK:
		f.Kind = store.KindPlaybook
	default:
		return nil, invalidArg("kind %d is not a RUN_KIND_* value", req.GetKind())
	}
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
		p := runToProto(forListing(r), h.s.hub.effective(r)) // playbook details only when small
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
	if err := printableText("reason", req.GetReason()); err != nil {
		return nil, err
	}
	if c, ok := CallerFrom(ctx); ok && c.Role == RoleExecutor {
		// Executors act only on runs they own (issue 6, item 1.3); approvers cancel any run.
		cur, err := h.s.st.Run(ctx, req.GetRunId())
		if err == nil && cur.Owner != c.Identity {
			return nil, rpcError(connect.CodePermissionDenied, CodePermissionDenied,
				"run %s is owned by another executor identity; executors cancel only their own runs", cur.RunID)
		}
	}
	run, err := h.s.st.CancelRun(ctx, req.GetRunId(), identity(ctx, "", "anonymous"), req.GetReason(), time.Time{})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
	case errors.Is(err, store.ErrRunFinal):
		cur, gerr := h.s.st.Run(ctx, req.GetRunId())
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
	type entry struct {
		proto *rbookv1.Evidence
		json  evidenceJSON
	}
	page, next, err := seqPage(ctx, h.s, req.GetRunId(), req.GetPageSize(), req.GetPageToken(),
		func(t store.Transition) (entry, int, bool) {
			if t.Evidence == nil {
				return entry{}, 0, false
			}
			e := evidenceToProto(*t.Evidence)
			j := evidenceJSON{StepName: e.StepName, Type: e.Type, Input: e.Input, Output: e.Output,
				Status: string(t.Evidence.Status), TimestampUTC: e.TimestampUtc}
			// The page carries each entry twice (message and JSON text); JSON escaping can
			// grow text up to six times for control characters, so count it generously.
			return entry{e, j}, proto.Size(e) + 2*len(e.GetOutput()) + 2*len(e.GetInput()) + 256, true
		})
	if err != nil {
		return nil, err
	}
	out := &rbookv1.GetEvidencePackResponse{Entries: make([]*rbookv1.Evidence, 0, len(page)), NextPageToken: next}
	pack := make([]evidenceJSON, 0, len(page))
	for _, e := range page {
		out.Entries = append(out.Entries, e.proto)
		pack = append(pack, e.json)
	}
	b, err := json.MarshalIndent(pack, "", "  ")
	if err != nil {
		return nil, h.s.storeError(ctx, "GetEvidencePack", err)
	}
	out.EvidencePackJson = string(b)
	return out, nil
}
