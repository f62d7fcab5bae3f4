package server_test

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// waitPG waits (up to 30 s) until query on db returns a row for which ok holds; the
// replicas' progress is visible only in the database here (the test's poll is on state,
// not on time).
func waitPG(t *testing.T, db *sql.DB, what, query string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Replica A claims a
// deployment_review delivery and is killed with kill -9 before its effect commits (its
// vote is blocked on the gate's row lock, held by the test). The delivery is not lost:
// a redelivery to B while A's claim's lease runs is answered 409 (not "already
// processed"), and once the lease has passed B takes the claim over and decides the gate,
// once; a further redelivery is a duplicate.
func TestWebhookClaimOfAKilledReplicaIsTakenOver(t *testing.T) {
	a, b, dsn := startGitHubReplicas(t)
	db := pgDB(t, dsn)
	a.rule(t, 9103, "production")
	ap, _ := ghGate(t, a.c, "r-claim", 9103, "production", time.Hour)
	a.waitBodies(t, 9103, "a status report", hasReport)

	// Hold the gate's row lock, so A's vote (SELECT … FOR UPDATE in its write) blocks after A
	// has claimed the delivery.
	lock, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	var held string
	if err := lock.QueryRow(`SELECT approval_id FROM playbook_approvals WHERE approval_id = $1 FOR UPDATE`, ap.GetApprovalId()).Scan(&held); err != nil {
		t.Fatal(err)
	}

	d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghRepo, InstallationID: 77, RunID: 9103,
		ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "LGTM",
		JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	toA := make(chan error, 1)
	go func() {
		req, err := d.Request(a.hookURL, []byte(ghSecret))
		if err == nil {
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		toA <- err
	}()
	waitPG(t, db, "A's claim of the delivery", `SELECT count(*) FROM github_deliveries WHERE delivery_id = $1 AND status = 'claimed'`, d.ID)
	waitPG(t, db, "A's vote waiting for the gate's row lock",
		`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`)

	// kill -9 A between its claim and its effect.
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	if err := <-toA; err == nil {
		t.Fatal("the delivery to A was answered; want its connection cut by the kill")
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A's open transaction dies with its connection (it never sent COMMIT): no vote.
	if got := ghApproval(t, b.c, ap.GetApprovalId()); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 0 {
		t.Fatalf("gate after A was killed: %v; want PENDING without votes", got)
	}

	// GitHub's redelivery to B while A's claim's lease runs: not processed, and not
	// acknowledged as processed either (409: GitHub shows it failed, so it can be redelivered).
	if code := b.post(t, d); code != http.StatusConflict {
		t.Fatalf("redelivery to B within A's lease answered %d, want 409\nB:\n%s", code, b.Stderr)
	}
	// B's log line may reach the test after its HTTP answer: wait for it.
	b.waitLog(t, 1, `reason="delivery being processed by another control-plane replica"`)
	// The lease passes (as if webhook.DeliveryClaimLease, 2 minutes, had gone by).
	if res, err := db.Exec(`UPDATE github_deliveries SET claimed_until = '2000-01-01T00:00:00.000000000Z' WHERE delivery_id = $1 AND status = 'claimed'`, d.ID); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d claimed rows for the delivery, want A's one", n)
	}
	if code := b.post(t, d); code != http.StatusOK {
		t.Fatalf("redelivery to B after the lease answered %d, want 200\nB:\n%s", code, b.Stderr)
	}
	b.waitLogsEither(t, b, "B's takeover and processing", func() bool {
		return logCount("taking over the expired claim of a delivery", b) == 1 &&
			logCount(`msg="github webhook processed" event=deployment_review delivery=`+d.ID, b) == 1
	})
	got := ghApproval(t, b.c, ap.GetApprovalId())
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || len(got.GetVotes()) != 1 || got.GetApprover() != "github:octo-lead" {
		t.Fatalf("gate after B took the delivery over: %v; want APPROVED with one vote by github:octo-lead", got)
	}
	var status string
	if err := db.QueryRow(`SELECT status FROM github_deliveries WHERE delivery_id = $1`, d.ID).Scan(&status); err != nil || status != "done" {
		t.Fatalf("delivery row status = %q, %v; want done", status, err)
	}
	// Processed now: a further redelivery is a duplicate.
	if code := b.post(t, d); code != http.StatusOK {
		t.Fatalf("a further redelivery answered %d, want 200", code)
	}
	b.waitLogEither(t, b, `msg="github webhook ignored" event=deployment_review delivery=`+d.ID+` reason="delivery already processed"`)
	// The verdict goes to GitHub once, from B.
	v := verdicts(b.waitBodies(t, 9103, "the approved verdict", func(x []ruleBody) bool { return len(verdicts(x)) > 0 }))
	b.waitLogEither(t, b, "github protection rule verdict delivered")
	if len(v) != 1 || *v[0].State != "approved" {
		t.Fatalf("verdicts %+v, want one approved", v)
	}
}
