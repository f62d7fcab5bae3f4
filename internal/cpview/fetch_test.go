package cpview

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// endlessRuns is a control plane whose GetRun always names a next page: perPage transitions
// a page, of a run whose last seq is lastSeq.
type endlessRuns struct {
	rbookv1connect.UnimplementedRunServiceHandler
	perPage int
	lastSeq int64
	pages   int
}

func (r *endlessRuns) GetRun(_ context.Context, req *rbookv1.GetRunRequest) (*rbookv1.GetRunResponse, error) {
	r.pages++
	resp := &rbookv1.GetRunResponse{Run: &rbookv1.Run{RunId: req.GetRunId(), LastSeq: r.lastSeq}, NextPageToken: "p" + strconv.Itoa(r.pages)}
	for i := 0; i < r.perPage; i++ {
		resp.Transitions = append(resp.Transitions, &rbookv1.Transition{Seq: int64(r.pages*r.perPage + i)})
	}
	return resp, nil
}

func runsServer(t *testing.T, h rbookv1connect.RunServiceHandler) *cpclient.Client {
	t.Helper()
	path, handler := rbookv1connect.NewRunServiceHandler(h)
	mux := http.NewServeMux()
	mux.Handle(path, handler)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return cpclient.New(srv.URL, "")
}

func TestGetRunAllStopsAtAControlPlaneWhosePagesDoNotEnd(t *testing.T) {
	cases := []struct {
		name      string
		perPage   int
		lastSeq   int64
		wantPages int
	}{
		{"pages with no transition", 0, 10, 1},
		{"more transitions than the run's last seq", 5, 12, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &endlessRuns{perPage: c.perPage, lastSeq: c.lastSeq}
			_, err := GetRunAll(context.Background(), runsServer(t, r), "RBOOK-20261202-x-0a1b2c3d")
			if err == nil || !strings.Contains(err.Error(), "its pages do not end") || r.pages != c.wantPages {
				t.Fatalf("err %v after %d pages, want 'its pages do not end' after %d", err, r.pages, c.wantPages)
			}
		})
	}
}
