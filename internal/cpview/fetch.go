package cpview

import (
	"context"
	"fmt"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// MaxRunTransitions caps the transitions GetRunAll gathers: far above any run's (a run's
// steps are capped, runplan.MaxSteps), so only a control plane that pages without end
// reaches it.
const MaxRunTransitions = 1_000_000

// GetRunAll is GetRun with every page of transitions (GetRun pages them). A control plane
// whose pages do not end is an error rather than a hang: a page with no transition but a
// next_page_token, more transitions than the run's last seq, or more than MaxRunTransitions.
func GetRunAll(ctx context.Context, c *cpclient.Client, runID string) (*rbookv1.GetRunResponse, error) {
	resp := &rbookv1.GetRunResponse{}
	for token := ""; ; {
		page, err := c.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: runID, PageToken: token})
		if err != nil {
			return nil, err
		}
		resp.Run, resp.Plan = page.GetRun(), page.GetPlan()
		resp.Transitions = append(resp.Transitions, page.GetTransitions()...)
		if token = page.GetNextPageToken(); token == "" {
			return resp, nil
		}
		n := int64(len(resp.Transitions))
		if len(page.GetTransitions()) == 0 || n > resp.GetRun().GetLastSeq() || n > MaxRunTransitions {
			return nil, fmt.Errorf("GetRun of run %s: the control plane goes on paging after %d transitions (the run's last seq is %d): its pages do not end; check the control plane's version", runID, n, resp.GetRun().GetLastSeq())
		}
	}
}

// ListRuns is ListRuns once per status of statuses (termui.ParseStatusFilter; one UNSPECIFIED for
// any), the runs merged newest first and cut to limit, as one call would return them.
func ListRuns(ctx context.Context, c *cpclient.Client, req *rbookv1.ListRunsRequest, statuses []rbookv1.RunStatus, limit int) (*rbookv1.ListRunsResponse, error) {
	resp := &rbookv1.ListRunsResponse{}
	for _, st := range statuses {
		q := &rbookv1.ListRunsRequest{Name: req.GetName(), PageSize: int32(limit), Status: st, Repository: req.GetRepository(), StartedBy: req.GetStartedBy()}
		page, err := c.Runs.ListRuns(ctx, q)
		if err != nil {
			return nil, err
		}
		resp.Runs = append(resp.Runs, page.GetRuns()...)
	}
	resp.Runs = termui.SortRunsNewestFirst(resp.Runs, limit)
	return resp, nil
}

// ListApprovals follows ListApprovals' pages (the control plane answers at most 40 at a time)
// until it has limit approvals or there are no more, and keeps at most limit.
func ListApprovals(ctx context.Context, c *cpclient.Client, req *rbookv1.ListApprovalsRequest, limit int) (*rbookv1.ListApprovalsResponse, error) {
	resp := &rbookv1.ListApprovalsResponse{}
	for len(resp.Approvals) < limit {
		page, err := c.Approvals.ListApprovals(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.Approvals = append(resp.Approvals, page.GetApprovals()...)
		if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	if len(resp.Approvals) > limit {
		resp.Approvals = resp.Approvals[:limit]
	}
	return resp, nil
}
