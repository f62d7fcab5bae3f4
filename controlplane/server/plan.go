package server

import (
	"context"

	"google.golang.org/protobuf/proto"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/runplan"
)

// startPlan checks StartRunRequest.plan against the wire contract's bounds (run.proto,
// RunPlan; runplan.Check) and encodes it for the store, bound to the request's content_hash.
// nil when the executor sent none. Error: E_INVALID_ARGUMENT naming the field.
func startPlan(req *rbookv1.StartRunRequest) ([]byte, error) {
	p := req.GetPlan()
	if p == nil {
		return nil, nil
	}
	if err := runplan.Check(p, req.GetContentHash(), int(req.GetTotalSteps())); err != nil {
		return nil, invalidArg("%v", err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return nil, invalidArg("plan cannot be encoded: %v", err)
	}
	return b, nil
}

// runPlanOf is the plan stored for run's current content_hash, or nil when the executor sent
// none for it (GetRunResponse.plan). A stored plan that does not decode, or names another
// digest (neither is ever written), is logged and left out rather than failing the read.
// Errors: storage errors.
func (s *Server) runPlanOf(ctx context.Context, runID, contentHash string) (*rbookv1.RunPlan, error) {
	b, err := s.st.RunPlan(ctx, runID, contentHash)
	if err != nil || b == nil {
		return nil, err
	}
	p := &rbookv1.RunPlan{}
	if err := proto.Unmarshal(b, p); err != nil || p.GetContentHash() != contentHash {
		s.log.WarnContext(ctx, "stored run plan left out: it does not decode or names another digest", "run_id", runID, "error", err)
		return nil, nil
	}
	return p, nil
}
