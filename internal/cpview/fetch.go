package cpview

import (
	"context"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// GetRunAll is GetRun with every page of transitions (GetRun pages them).
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
