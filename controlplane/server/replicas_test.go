package server_test

// Two `rbook serve` replicas on one
// PostgreSQL database. Each test creates its own database from RBOOK_TEST_POSTGRES_URL and
// skips with docs/decisions/postgres-tests.md's message without it.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the test's own reads

	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// newPGDatabase creates database rbook_t_<random> from RBOOK_TEST_POSTGRES_URL, drops it
// WITH (FORCE) when the test ends, and returns its DSN.
func newPGDatabase(t testing.TB) string {
	t.Helper()
	base := os.Getenv("RBOOK_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip(pgSkipMessage)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "rbook_t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// pgDB opens the test's own pool on dsn (to read what the replicas stored).
func pgDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// startReplicas starts two `rbook serve --db dsn` processes (A and B) on one fresh database.
func startReplicas(t *testing.T, extra ...string) (a, b *serveProc, dsn string) {
	t.Helper()
	dsn = newPGDatabase(t)
	a = startServe(t, append([]string{"--db", dsn}, extra...)...)
	b = startServe(t, append([]string{"--db", dsn}, extra...)...)
	return a, b, dsn
}

// watchRunSeqs opens WatchRun on c from seq 1 and returns a func that reads the stream to its
// end and returns the transition seqs it carried, in order.
func watchRunSeqs(t *testing.T, c clients, runID string) func() []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := c.runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: runID, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() { // the first message: the run as it stands (and its replay)
		t.Fatalf("WatchRun %s: no first message: %v", runID, s.Err())
	}
	var seqs []int64
	if tr := s.Msg().GetTransition(); tr != nil {
		seqs = append(seqs, tr.GetSeq())
	}
	return func() []int64 {
		for s.Receive() {
			if tr := s.Msg().GetTransition(); tr != nil {
				seqs = append(seqs, tr.GetSeq())
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("WatchRun %s ended with %v after seqs %v", runID, err, seqs)
		}
		return seqs
	}
}

func seqRange(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

func TestWatchRunOnBSeesEveryTransitionRecordedThroughA(t *testing.T) {
	a, b, _ := startReplicas(t)
	ca, cb := newClients(a.URL), newClients(b.URL)
	startRun(t, ca, "r-watch")
	record(t, ca, transition("r-watch", 1, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	finish := watchRunSeqs(t, cb, "r-watch")
	const n = 60
	for seq := int64(2); seq < n; seq++ {
		record(t, ca, transition("r-watch", seq, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	}
	record(t, ca, transition("r-watch", n, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	got := finish()
	if fmt.Sprint(got) != fmt.Sprint(seqRange(n)) {
		t.Fatalf("WatchRun on B carried seqs %v, want 1..%d once each, in order", got, n)
	}
	res, err := cb.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: "r-watch"})
	if err != nil {
		t.Fatal(err)
	}
	var stored []int64
	for _, x := range res.GetTransitions() {
		stored = append(stored, x.GetSeq())
	}
	if fmt.Sprint(stored) != fmt.Sprint(got) || res.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED {
		t.Fatalf("GetRun on B: seqs %v, status %v; the watch saw %v", stored, res.GetRun().GetStatus(), got)
	}
}

func TestApproveOnBWakesTheGateWaitOnA(t *testing.T) {
	a, b, _ := startReplicas(t)
	ca, cb := newClients(a.URL), newClients(b.URL)
	startRun(t, ca, "r-gate")
	ap, token := gate(t, ca, "r-gate", time.Hour)
	waitA, first := watchApproval(t, ca, ap.GetApprovalId()) // the executor's gate wait, through A
	watchB, _ := watchApproval(t, cb, ap.GetApprovalId())    // an observer on B
	if first.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("gate on A: %v, want PENDING", first)
	}
	res, err := cb.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token, Approver: "bob", Reason: "go"})
	if err != nil {
		t.Fatalf("Approve on B: %v", err)
	}
	if res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("Approve on B: %v", res.GetApproval())
	}
	for name, s := range map[string]*connect.ServerStreamForClient[rbookv1.WatchApprovalResponse]{"A": waitA, "B": watchB} {
		if got := lastApproval(t, s); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || got.GetApprover() != "unverified:bob" {
			t.Fatalf("WatchApproval on %s ended with %v, want APPROVED by unverified:bob", name, got)
		}
	}
	// A decided gate cannot be decided again, through either replica.
	_, err = ca.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: token, Approver: "eve"})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")

	// The other way round: a WatchApproval on B sees a decision made on A.
	startRun(t, ca, "r-gate2")
	ap2, token2 := gate(t, ca, "r-gate2", time.Hour)
	watch2, first2 := watchApproval(t, cb, ap2.GetApprovalId())
	if first2.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("second gate on B: %v, want PENDING", first2)
	}
	if _, err := ca.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: token2, Approver: "carol", Reason: "not now"}); err != nil {
		t.Fatalf("Reject on A: %v", err)
	}
	if got := lastApproval(t, watch2); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || got.GetReason() != "not now" {
		t.Fatalf("WatchApproval on B ended with %v, want REJECTED 'not now'", got)
	}
}

func TestLeaseAndEpochHoldAcrossReplicas(t *testing.T) {
	a, b, _ := startReplicas(t)
	ca, cb := newClients(a.URL), newClients(b.URL)
	ctx := context.Background()
	startRun(t, ca, "r-lease") // epoch 1, through A
	record(t, ca, transition("r-lease", 1, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	if _, err := ca.runs.RenewLease(ctx, &rbookv1.RenewLeaseRequest{RunId: "r-lease", OwnerId: testOwner, Epoch: 1}); err != nil {
		t.Fatalf("heartbeat through A: %v", err)
	}
	// Another owner cannot take the live lease through B.
	_, err := cb.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: "other-owner-0123456789", RunId: "r-lease", Name: "demo",
		ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5, StartedBy: "mallory", TakeOver: true})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_LEASE_HELD")
	// The owner resumes through B: epoch 2. The epoch-1 executor, still talking to A, is fenced.
	res, err := cb.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "r-lease", Name: "demo",
		ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5, StartedBy: "tester"})
	if err != nil || res.GetRun().GetLease().GetEpoch() != 2 {
		t.Fatalf("resume through B: %v, %v; want epoch 2", res, err)
	}
	_, err = ca.runs.RenewLease(ctx, &rbookv1.RenewLeaseRequest{RunId: "r-lease", OwnerId: testOwner, Epoch: 1})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_LEASE_LOST")
	_, err = ca.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{OwnerId: testOwner, Epoch: 1,
		Transition: transition("r-lease", 2, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED)})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_LEASE_LOST")
	// The epoch-2 executor records through A and B alternately; nothing is refused or lost.
	for seq := int64(2); seq <= 6; seq++ {
		c := []clients{ca, cb}[seq%2]
		if _, err := c.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{OwnerId: testOwner, Epoch: 2,
			Transition: transition("r-lease", seq, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED)}); err != nil {
			t.Fatalf("seq %d at epoch 2: %v", seq, err)
		}
	}
	got, err := ca.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "r-lease"})
	if err != nil || len(got.GetTransitions()) != 6 || got.GetRun().GetLease().GetEpoch() != 2 {
		t.Fatalf("GetRun: %d transitions at epoch %d (%v); want 6 at epoch 2", len(got.GetTransitions()), got.GetRun().GetLease().GetEpoch(), err)
	}
}

// startGitHubReplicas starts two GitHub App replicas on one database and one fake GitHub.
func startGitHubReplicas(t *testing.T) (a, b *ghServe, dsn string) {
	t.Helper()
	dsn = newPGDatabase(t)
	gh := ghfake.New(t, 4711)
	secret := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secret, []byte(ghSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *ghServe {
		p := startServe(t, "--db", dsn, "--github-app-id", "4711", "--github-app-key", gh.KeyFile,
			"--github-webhook-secret-file", secret, "--github-api-url", gh.URL)
		return &ghServe{serveProc: p, gh: gh, hookURL: p.URL + "/github/webhook", c: newClients(p.URL)}
	}
	return start(), start(), dsn
}

// logCount counts s in both replicas' logs.
func logCount(s string, ps ...*ghServe) int {
	n := 0
	for _, p := range ps {
		n += strings.Count(p.Stderr.String(), s)
	}
	return n
}

func TestSameWebhookDeliveryToBothReplicasIsProcessedOnce(t *testing.T) {
	a, b, dsn := startGitHubReplicas(t)
	a.rule(t, 9101, "production")
	ap, _ := ghGate(t, a.c, "r-hook", 9101, "production", time.Hour)
	a.waitBodies(t, 9101, "a status report", hasReport)

	d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghRepo, InstallationID: 77, RunID: 9101,
		ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "LGTM",
		JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, s := range []*ghServe{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i] = s.post(t, d) }()
	}
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Fatalf("the delivery to A and B answered %v, want 200 twice", codes)
	}
	processed := `msg="github webhook processed" event=deployment_review delivery=` + d.ID
	ignored := `msg="github webhook ignored" event=deployment_review delivery=` + d.ID + ` reason="delivery already processed"`
	// The log reaches the test through a pipe, after the answer: wait for both lines.
	a.waitLogsEither(t, b, "both replicas' log lines of the delivery", func() bool { return logCount(processed, a, b)+logCount(ignored, a, b) >= 2 })
	if n, m := logCount(processed, a, b), logCount(ignored, a, b); n != 1 || m != 1 {
		t.Fatalf("%d replicas processed the delivery and %d ignored it, want 1 and 1\nA:\n%s\nB:\n%s", n, m, a.Stderr, b.Stderr)
	}
	got := ghApproval(t, b.c, ap.GetApprovalId())
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || len(got.GetVotes()) != 1 || got.GetApprover() != "github:octo-lead" {
		t.Fatalf("gate after the review: %v; want APPROVED with one vote by github:octo-lead", got)
	}
	// The verdict goes back to GitHub once, by one replica.
	v := verdicts(a.waitBodies(t, 9101, "the approved verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 }))
	a.waitLogEither(t, b, "github protection rule verdict delivered")
	if len(v) != 1 || *v[0].State != "approved" {
		t.Fatalf("verdicts %+v, want one approved", v)
	}
	var sent sql.NullString
	if err := pgDB(t, dsn).QueryRow(`SELECT verdict_sent_at FROM github_protection_rules`).Scan(&sent); err != nil || !sent.Valid {
		t.Fatalf("verdict_sent_at = %v, %v; want set", sent, err)
	}
	if n := len(verdicts(a.ruleBodies(t, 9101))); n != 1 || logCount("github protection rule verdict delivered", a, b) != 1 {
		t.Fatalf("%d verdict POSTs, %d deliveries logged: want 1 and 1", n, logCount("github protection rule verdict delivered", a, b))
	}
	var deliveries int
	if err := pgDB(t, dsn).QueryRow(`SELECT count(*) FROM github_deliveries WHERE delivery_id = $1`, d.ID).Scan(&deliveries); err != nil || deliveries != 1 {
		t.Fatalf("github_deliveries rows for the delivery: %d, %v; want 1", deliveries, err)
	}
}

// waitLogEither waits (up to 30 s) until s or o logged want.
func (s *ghServe) waitLogEither(t *testing.T, o *ghServe, want string) {
	t.Helper()
	s.waitLogsEither(t, o, fmt.Sprintf("%q", want), func() bool { return logCount(want, s, o) > 0 })
}

// waitLogsEither waits (up to 30 s, woken by each write to either log) until ok holds.
func (s *ghServe) waitLogsEither(t *testing.T, o *ghServe, what string, ok func() bool) {
	t.Helper()
	expired := time.After(30 * time.Second)
	for {
		c1, c2 := s.Stderr.Changed(), o.Stderr.Changed()
		if ok() {
			return
		}
		select {
		case <-c1:
		case <-c2:
		case <-expired:
			t.Fatalf("the replicas never logged %s\nA:\n%s\nB:\n%s", what, s.Stderr, o.Stderr)
		}
	}
}

func TestGateDeadlineFiresOnceWithBothSweepers(t *testing.T) {
	a, b, dsn := startGitHubReplicas(t)
	a.rule(t, 9102, "production")
	ap, _ := ghGate(t, a.c, "r-deadline2", 9102, "production", 3*time.Second)
	watchB, first := watchApproval(t, b.c, ap.GetApprovalId()) // B knows the gate, so its sweeper waits for it too
	if first.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("gate on B: %v", first)
	}
	got := lastApproval(t, watchB)
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || got.GetDecidedBySource() != "deadline" {
		t.Fatalf("gate after its deadline: %v; want REJECTED by the deadline", got)
	}
	v := verdicts(a.waitBodies(t, 9102, "the timed-out verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 }))
	a.waitLogEither(t, b, "github protection rule verdict delivered")
	a.waitLogEither(t, b, "gate expired")
	if len(v) != 1 || *v[0].State != "rejected" || !strings.HasPrefix(v[0].Comment, "timed out after 3s") {
		t.Fatalf("verdicts %+v, want one 'timed out after 3s'", v)
	}
	if n := logCount("gate expired", a, b); n != 1 {
		t.Fatalf("%d replicas closed the gate, want 1\nA:\n%s\nB:\n%s", n, a.Stderr, b.Stderr)
	}
	var status, source string
	if err := pgDB(t, dsn).QueryRow(`SELECT status, decided_by_source FROM playbook_approvals WHERE approval_id = $1`, ap.GetApprovalId()).
		Scan(&status, &source); err != nil || status != "rejected" || source != "deadline" {
		t.Fatalf("stored gate: %s / %s (%v)", status, source, err)
	}
}
