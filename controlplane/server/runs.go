package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Request limits documented in run_service.proto.
const (
	maxRunIDBytes  = 128
	maxReasonBytes = 1024
)

var (
	runbookNameRE = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`) // run ids and file names are built from it
	planDigestRE  = lazyregexp.New(`^[0-9a-f]{64}$`)
	schemaHash8RE = lazyregexp.New(`^[0-9a-f]{8}$`)
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
var ownerIDRE = lazyregexp.New(`^[A-Za-z0-9_-]{16,128}$`)

// fenceOf is the lease fence of an executor's write: its owner id and epoch and, when the
// caller is an authenticated executor, its identity (docs/decisions/leases-and-fencing.md, docs/decisions/identity.md).
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
	plan, err := startPlan(req)
	if err != nil {
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
		EpicID: req.GetEpicId(), SessionID: req.GetSessionId(), Plan: plan,
	}
	if b := req.GetBindings(); b != "" {
		nr.Bindings = json.RawMessage(b) // the run's first bindings (docs/playbooks.md, "Inputs and bindings"); kept on resume
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
		h.s.metrics.LeaseTakeover()
		h.s.log.InfoContext(ctx, "run taken over", "run_id", run.RunID, "owner", run.Owner, "epoch", run.LeaseEpoch)
	}
	shown := runToProto(run, h.s.hub.effective(run))
	if outcome != store.Created {
		// A resume or take-over continues the run's hash chain from here (docs/evidence-chain.md).
		if shown.ChainHead, err = h.s.st.ChainHead(ctx, run.RunID); err != nil {
			return nil, h.s.storeError(ctx, "StartRun", err)
		}
	}
	return &rbookv1.StartRunResponse{Run: shown, Created: outcome == store.Created}, nil
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
	began := time.Now()
	res, err := h.s.st.RecordTransition(ctx, t, fence)
	if err != nil {
		return nil, h.recordError(ctx, "RecordTransition", t, err)
	}
	stored := 1
	if res.Duplicate {
		stored = 0
	}
	h.s.countRecorded(stored, time.Since(began))
	if err := h.afterRecord(ctx, t, res.Progress); err != nil {
		return nil, err
	}
	return &rbookv1.RecordTransitionResponse{Duplicate: res.Duplicate, LastSeq: res.Progress.LastSeq}, nil
}

// recordError maps the store's refusal of transition t (RecordTransition, RecordTransitions)
// to its RPC error: E_RUN_NOT_FOUND, E_SEQ_CONFLICT, E_SEQ_GAP, E_CHAIN_BROKEN, E_RUN_FINAL or
// E_RUN_CANCELLED, else storeError's mapping (E_LEASE_LOST, E_PERMISSION_DENIED, …).
func (h runService) recordError(ctx context.Context, op string, t store.Transition, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", t.RunID)
	case errors.Is(err, store.ErrConflict):
		return rpcError(connect.CodeAlreadyExists, CodeSeqConflict,
			"run %s already has a different transition with seq %d", t.RunID, t.Seq)
	case errors.Is(err, store.ErrOutOfOrder):
		return rpcError(connect.CodeFailedPrecondition, CodeSeqGap, "%s; send the missing transitions first",
			storeMessage(err, store.ErrOutOfOrder))
	case errors.Is(err, store.ErrRunFinal):
		return h.s.finalRunError(ctx, t.RunID)
	case errors.Is(err, store.ErrChainBroken):
		return rpcError(connect.CodeFailedPrecondition, CodeChainBroken, "%s; the executor must continue the run's chain from the control plane's head (docs/evidence-chain.md)",
			storeMessage(err, store.ErrChainBroken))
	}
	return h.s.storeError(ctx, op, err)
}

// afterRecord is what follows a stored transition t (the last of a batch) whose run is now at
// progress p: a final run's pending gates close, and a cancelled run's executor is told to
// stop (E_RUN_CANCELLED) unless t itself reports the cancel.
func (h runService) afterRecord(ctx context.Context, t store.Transition, p store.RunProgress) error {
	st := p.Status
	if err := h.closeFinalGates(ctx, t.RunID, st); err != nil {
		return err
	}
	if st == store.RunCancelled && t.RunStatus != store.ExecCancelled {
		// Stored for the record (an executor winding down), but the executor must stop.
		return rpcError(connect.CodeFailedPrecondition, CodeRunCancelled,
			"run %s was cancelled; transition %d was stored for the record and the run must stop", t.RunID, t.Seq)
	}
	return nil
}

// closeFinalGates closes the pending gates of a run that is now final (st), with the source
// and reason of why, then signs the run's attestation (attestFinalRun); a run that is not
// final keeps them.
func (h runService) closeFinalGates(ctx context.Context, runID string, st store.RunStatus) error {
	if !st.Final() {
		return nil
	}
	source, reason := sourceRunFinished, "closed: the run finished ("+string(st)+")"
	if st == store.RunCancelled {
		source, reason = store.SourceCancelRun, "closed: the run was cancelled"
	}
	if err := h.s.closeGates(ctx, runID, source, reason); err != nil {
		return err
	}
	h.s.attestFinalRun(ctx, runID) // after the gates closed, so the attestation names those decisions too
	return nil
}

// RecordTransitions stores a batch of one run's transitions in one durable commit (docs/decisions/durability.md; store.RecordTransitions), with RecordTransition's fence, lease renewal, watcher
// fan-out and error mapping. When a transition of the batch is refused after an earlier one
// of it is stored (or was already), the answer is the ack alone: the caller resends from
// acked_seq + 1 and then gets the refusal. The error is returned when nothing of the batch
// is stored. Errors: those of RecordTransition; E_INVALID_ARGUMENT for an empty batch, more
// than store.MaxBatchTransitions, more than store.MaxBatchBytes, two run ids or seqs that
// are not consecutive, naming the transition's index.
func (h runService) RecordTransitions(ctx context.Context, req *rbookv1.RecordTransitionsRequest) (*rbookv1.RecordTransitionsResponse, error) {
	in := req.GetTransitions()
	switch {
	case len(in) == 0:
		return nil, invalidArg("transitions is empty; send 1 to %d transitions", store.MaxBatchTransitions)
	case len(in) > store.MaxBatchTransitions:
		return nil, invalidArg("transitions holds %d, over the limit of %d", len(in), store.MaxBatchTransitions)
	}
	ts := make([]store.Transition, len(in))
	for i, p := range in {
		t, err := transitionFromProto(p)
		if err != nil {
			var ce *connect.Error
			if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
				return nil, invalidArg("transitions[%d]: %s", i, strings.TrimPrefix(ce.Message(), CodeInvalidArgument+": "))
			}
			return nil, err
		}
		ts[i] = t
	}
	fence, err := fenceOf(ctx, req.GetOwnerId(), req.GetEpoch())
	if err != nil {
		return nil, err
	}
	began := time.Now()
	res, err := h.s.st.RecordTransitions(ctx, ts, fence)
	handled := res.Stored + res.Duplicates
	if handled > 0 {
		h.s.countRecorded(res.Stored, time.Since(began))
	}
	if err != nil && handled == 0 {
		failed := res.Failed
		if failed.RunID == "" {
			failed = ts[0]
		}
		return nil, h.recordError(ctx, "RecordTransitions", failed, err)
	}
	if handled < len(ts) {
		// The rest is refused on the resend; a final run's gates close now all the same.
		if err := h.closeFinalGates(ctx, ts[0].RunID, res.Progress.Status); err != nil {
			return nil, err
		}
	} else if err := h.afterRecord(ctx, ts[handled-1], res.Progress); err != nil {
		return nil, err
	}
	return &rbookv1.RecordTransitionsResponse{AckedSeq: res.AckedSeq, Duplicates: int32(res.Duplicates)}, nil
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
		renew = h.s.st.ReleaseLease // pause mode: the next executor takes over at once (docs/approvals.md, "Pause mode")
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
// GetEvidencePack page (docs/control-plane.md, "Limits"): under gRPC's default 4 MiB receive limit with
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
	if shown.ChainHead, err = h.s.st.ChainHead(ctx, run.RunID); err != nil {
		return nil, h.s.storeError(ctx, "GetRun", err)
	}
	plan, err := h.s.runPlanOf(ctx, run.RunID, run.PlaybookHash)
	if err != nil {
		return nil, h.s.storeError(ctx, "GetRun", err)
	}
	// The run (a playbook's bindings and node states), its plan and the page share MaxResponseBytes.
	page, next, err := seqPageBudget(ctx, h.s, req.GetRunId(), req.GetPageSize(), req.GetPageToken(), MaxResponseBytes-proto.Size(shown)-proto.Size(plan),
		func(t store.Transition) (*rbookv1.Transition, int, bool) {
			p := transitionToProto(t)
			return p, proto.Size(p), true
		})
	if err != nil {
		return nil, err
	}
	return &rbookv1.GetRunResponse{Run: shown, Transitions: page, NextPageToken: next, Plan: plan}, nil
}

func (h runService) ListRuns(ctx context.Context, req *rbookv1.ListRunsRequest) (*rbookv1.ListRunsResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, invalidArg("page_size is %d, must be >= 0", req.GetPageSize())
	}
	f := store.RunFilter{PlaybookName: req.GetName(), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken(),
		Repository: req.GetRepository(), StartedBy: req.GetStartedBy()}
	if err := listRunsRange(req, &f); err != nil {
		return nil, err
	}
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

// listRunsRange checks ListRunsRequest's repository, started_by, started_after and
// started_before (run_service.proto) and sets f's time range. Errors: E_INVALID_ARGUMENT
// naming the field: too long a repository or started_by, an invalid timestamp, or a range
// that holds no time (started_after not before started_before).
func listRunsRange(req *rbookv1.ListRunsRequest, f *store.RunFilter) error {
	switch {
	case len(req.GetRepository()) > store.MaxWorkflowRunField:
		return invalidArg("repository is %d bytes, over the limit of %d; give \"owner/name\"", len(req.GetRepository()), store.MaxWorkflowRunField)
	case len(req.GetStartedBy()) > store.MaxIDBytes:
		return invalidArg("started_by is %d bytes, over the limit of %d", len(req.GetStartedBy()), store.MaxIDBytes)
	}
	if a := req.GetStartedAfter(); a != nil {
		if a.CheckValid() != nil {
			return invalidArg("started_after is not a valid timestamp")
		}
		f.StartedAfter = a.AsTime()
	}
	if b := req.GetStartedBefore(); b != nil {
		if b.CheckValid() != nil {
			return invalidArg("started_before is not a valid timestamp")
		}
		f.StartedBefore = b.AsTime()
	}
	if !f.StartedAfter.IsZero() && !f.StartedBefore.IsZero() && !f.StartedAfter.Before(f.StartedBefore) {
		return invalidArg("started_after (%s) must be before started_before (%s)",
			f.StartedAfter.UTC().Format(time.RFC3339Nano), f.StartedBefore.UTC().Format(time.RFC3339Nano))
	}
	return nil
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
		// Executors act only on runs they own (docs/decisions/identity.md); approvers cancel any run.
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

// evidenceJSON is one entry of evidence_pack_json and of the evidence pack file: the
// specification's fields in its order (docs/spec/runbooks.md, "Step 7"), then rbook's
// additions as the executor writes them (docs/decisions/two-renderings.md, docs/evidence-chain.md).
type evidenceJSON struct {
	StepName       string  `json:"step_name"`
	Type           string  `json:"type"`
	Input          *string `json:"input"`
	Output         string  `json:"output"`
	Status         string  `json:"status"`
	TimestampUTC   string  `json:"timestamp_utc"`
	SourceInput    *string `json:"source_input,omitempty"`
	TransitionHash string  `json:"transition_hash,omitempty"`
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
			e, j := evidenceToProto(*t.Evidence), evidenceEntry(t)
			e.TransitionHash = t.Hash
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
	b, err := encodeEvidencePack(pack)
	if err != nil {
		return nil, h.s.storeError(ctx, "GetEvidencePack", err)
	}
	out.EvidencePackJson = string(b)
	return out, nil
}
