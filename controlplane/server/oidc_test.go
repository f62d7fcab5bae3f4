package server_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// testAudience is the audience the OIDC test servers require (their public URL).
const testAudience = "https://rbook.example.internal"

// startOIDCServer runs an in-process control plane that verifies OIDC tokens of iss by cfg's
// rules (nil: owner/repo on refs/heads/*) and, with authFile, the auth file's tokens too;
// each of with may set more options.
func startOIDCServer(t *testing.T, iss *authtest.Issuer, authFile string, rules string, with ...func(*server.Options)) *server.Running {
	t.Helper()
	if rules == "" {
		rules = "  - repository: owner/repo\n    ref: refs/heads/*\n"
	}
	cfg, err := auth.ParseOIDCConfig([]byte("issuers: ["+iss.URL+"]\ninsecure_http_issuers: true\naudience: "+testAudience+"\nrules:\n"+rules), "oidc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{Secret: []byte(testSecret), OIDC: v}
	if authFile != "" {
		if opts.Auth, err = server.LoadAuthFile(authFile); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range with {
		w(&opts)
	}
	r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "cp.db"), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// wantRefused fails unless err is Unauthenticated / E_UNAUTHENTICATED with a message that
// contains why and does not contain the token.
func wantRefused(t *testing.T, err error, tok, why string) {
	t.Helper()
	wantCode(t, err, connect.CodeUnauthenticated, server.CodeUnauthenticated)
	msg := connect.NewError(connect.CodeUnknown, err).Error()
	if !strings.Contains(msg, why) {
		t.Errorf("message %q does not say %q", msg, why)
	}
	for _, part := range strings.Split(tok, ".") {
		if len(part) > 8 && strings.Contains(msg, part) {
			t.Errorf("message %q echoes part of the token", msg)
		}
	}
}

// A GitHub Actions job's OIDC token makes it an executor: it starts a run
// (started_by is oidc:<repository>@<ref> whatever the request claims), records transitions
// and opens a gate; GetRun shows the job from the verified claims; the executor may not
// approve, an auth-file approver may; the issuer's keys are fetched once and cached.
func TestOIDCExecutorStartsAndRecords(t *testing.T) {
	iss := authtest.NewIssuer(t)
	r := startOIDCServer(t, iss, writeAuthFile(t), "")
	tok := iss.Mint(t, testAudience, nil)
	c := newClients(r.URL(), withBearer(tok))
	ctx := context.Background()
	res, err := c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "RUN-OIDC-1", Name: "demo",
		ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5, StartedBy: "mallory"})
	if err != nil {
		t.Fatalf("StartRun with an OIDC token: %v", err)
	}
	if got := res.GetRun().GetStartedBy(); got != "oidc:owner/repo@refs/heads/main" {
		t.Errorf("started_by = %q, want oidc:owner/repo@refs/heads/main", got)
	}
	record(t, c, transition("RUN-OIDC-1", 1, 0))
	a, token := gate(t, c, "RUN-OIDC-1", time.Hour)

	got, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "RUN-OIDC-1"})
	if err != nil {
		t.Fatal(err)
	}
	run := got.GetRun()
	job := run.GetStartedByJob()
	want := &rbookv1.GitHubJob{Actor: "octocat", Repository: "owner/repo", RepositoryId: "424242", RunId: "1234567890",
		RunAttempt: "2", Sha: "0123456789abcdef0123456789abcdef01234567", WorkflowRef: "owner/repo/.github/workflows/deploy.yml@refs/heads/main",
		Ref: "refs/heads/main", Environment: "production", JobWorkflowRef: "owner/repo/.github/workflows/deploy.yml@refs/heads/main"}
	if job.String() != want.String() {
		t.Errorf("started_by_job = %v\nwant %v", job, want)
	}
	if run.GetStartedBy() != "oidc:owner/repo@refs/heads/main" || run.GetLease().GetOwner() != "oidc:owner/repo@refs/heads/main" {
		t.Errorf("started_by %q, lease owner %q", run.GetStartedBy(), run.GetLease().GetOwner())
	}

	// The executor role only: Approve is refused, also with the gate's token.
	_, err = c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Reason: "self"})
	wantCode(t, err, connect.CodePermissionDenied, server.CodePermissionDenied)
	if !strings.Contains(err.Error(), "oidc:owner/repo@refs/heads/main (role executor)") {
		t.Errorf("refusal %v does not name the OIDC identity and its role", err)
	}
	alice := newClients(r.URL(), withBearer("appr-token-0123456789"))
	dec, err := alice.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Reason: "ok"})
	if err != nil || dec.GetApproval().GetApprover() != "alice" || dec.GetApproval().GetApprovalId() != a.GetApprovalId() {
		t.Fatalf("Approve by alice: %v, %v", dec, err)
	}

	// A run started by an auth-file executor has no job.
	bot := newClients(r.URL(), withBearer("exec-token-0123456789"))
	if run := startRun(t, bot, "RUN-TOKEN-1"); run.GetStartedByJob() != nil || run.GetStartedBy() != "ci-bot" {
		t.Errorf("auth-file run: started_by %q, job %v", run.GetStartedBy(), run.GetStartedByJob())
	}
	// Many calls, one key fetch (go-oidc's remote key set caches the JWKS).
	if n := iss.JWKSRequests.Load(); n != 1 {
		t.Errorf("the JWKS was fetched %d times, want 1", n)
	}
}

// Wrong audience, an issuer not on the allow-list, an expired token, a
// forged one (signed by another key), and a job no rule matches are refused with
// Unauthenticated / E_UNAUTHENTICATED, saying why and never echoing the token.
func TestOIDCRefusals(t *testing.T) {
	iss := authtest.NewIssuer(t)
	other := authtest.NewIssuer(t) // serves discovery and keys too, but is not allowed
	r := startOIDCServer(t, iss, "", "  - repository: owner/repo\n    ref: refs/heads/main\n    environment: prod*\n")
	ctx := context.Background()
	for _, tc := range []struct {
		name, tok, why string
	}{
		{"wrong audience", iss.Mint(t, "https://elsewhere.example", nil), `is for audience "https://elsewhere.example", not this control plane's "` + testAudience + `"`},
		{"wrong issuer", other.Mint(t, testAudience, nil), `issuer "` + other.URL + `" is not allowed here`},
		{"expired", iss.MintExpired(t, testAudience), "the OIDC token expired at"},
		{"forged", iss.MintForged(t, testAudience), "signature does not verify with the keys of issuer " + iss.URL},
		{"unknown repository", iss.Mint(t, testAudience, map[string]any{"repository": "evil/repo", "repository_id": "666"}), "no rule of the OIDC config matches repository evil/repo"},
		{"other ref", iss.Mint(t, testAudience, map[string]any{"ref": "refs/heads/feature"}), "ref refs/heads/feature"},
		{"other environment", iss.Mint(t, testAudience, map[string]any{"environment": "staging"}), `environment "staging"`},
		{"not a GitHub job", iss.Mint(t, testAudience, map[string]any{"repository": ""}), "no repository or ref claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClients(r.URL(), withBearer(tc.tok))
			_, err := c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "RUN-X", Name: "demo",
				ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5})
			wantRefused(t, err, tc.tok, tc.why)
			_, err = c.runs.ListRuns(ctx, &rbookv1.ListRunsRequest{}) // reads too
			wantRefused(t, err, tc.tok, tc.why)
		})
	}
	// The same server, a matching token: accepted (so the refusals above are the claims'),
	// and nothing was created by the refused calls.
	c := newClients(r.URL(), withBearer(iss.Mint(t, testAudience, nil)))
	list, err := c.runs.ListRuns(ctx, &rbookv1.ListRunsRequest{})
	if err != nil || len(list.GetRuns()) != 0 {
		t.Fatalf("ListRuns with a good token: %v, %v", list, err)
	}
	// An OIDC-only server takes no other bearer token.
	_, err = newClients(r.URL(), withBearer("exec-token-0123456789")).runs.ListRuns(ctx, &rbookv1.ListRunsRequest{})
	wantRefused(t, err, "", "accepts only GitHub Actions OIDC tokens")
}

// For the four-eyes rule: the starter identities of a run are its
// started_by and, when a GitHub job started it, github:<actor>.
func TestRunStarterIdentities(t *testing.T) {
	for _, tc := range []struct {
		run  store.Run
		want []string
	}{
		{store.Run{StartedBy: "oidc:owner/repo@refs/heads/main", GitHub: &store.GitHubJob{Actor: "octocat", Repository: "owner/repo"}},
			[]string{"oidc:owner/repo@refs/heads/main", "github:octocat"}},
		{store.Run{StartedBy: "alice"}, []string{"alice"}},
		{store.Run{GitHub: &store.GitHubJob{Repository: "owner/repo"}}, nil},
		{store.Run{}, nil},
	} {
		if got := server.RunStarterIdentities(tc.run); !slices.Equal(got, tc.want) {
			t.Errorf("RunStarterIdentities(%+v) = %q, want %q", tc.run, got, tc.want)
		}
	}
}
