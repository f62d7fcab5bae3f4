package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/smtptest"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// A run a GitHub Actions job started has started_by oidc:<repository>@<ref>, which is no
// person and no address; the decision of its gate is mailed to the person linked to the
// workflow's actor (github:<actor>, the verified claim kept with the run) at that person's
// email: identity (docs/notifications.md, "Channels").
func TestOIDCStartedRunMailsTheDecisionToTheWorkflowActorsPerson(t *testing.T) {
	sink, addr := smtptest.Start(t)
	dir, err := people.Parse([]byte(`people:
  - id: octo
    identities: ["github:octocat", "email:octo@example.com"]
`), "people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := notify.ParseConfig([]byte(fmt.Sprintf(`channels:
  - {name: mail, kind: email, smtp: %q, from: rbook@example.com, to_requester: true}
routes:
  - events: [gate.decided]
    channels: [mail]
`, addr)), "notify.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	iss := authtest.NewIssuer(t)
	r := startOIDCServer(t, iss, writeAuthFile(t), "", func(o *server.Options) {
		o.Notify, o.People, o.Logger = &server.NotifyOptions{Config: cfg}, dir, slog.New(slog.DiscardHandler)
	})
	job := newClients(r.URL(), withBearer(iss.Mint(t, testAudience, nil)))
	if run := startRun(t, job, "RUN-OIDC-MAIL"); run.GetStartedBy() != "oidc:owner/repo@refs/heads/main" {
		t.Fatalf("started_by = %q, want the job's OIDC identity", run.GetStartedBy())
	}
	record(t, job, transition("RUN-OIDC-MAIL", 1, 0))
	_, tok := gate(t, job, "RUN-OIDC-MAIL", time.Hour)
	alice := newClients(r.URL(), withBearer("appr-token-0123456789"))
	if _, err := alice.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok, Reason: "ship it"}); err != nil {
		t.Fatal(err)
	}
	mails := sink.WaitFor(t, 1)
	if want := []string{"octo@example.com"}; !slices.Equal(mails[0].To, want) {
		t.Errorf("the decision went to %v, want %v", mails[0].To, want)
	}
	for _, want := range []string{"Subject: Gate approve (demo) approved", "Decided by: alice via rpc", "Reason: ship it"} {
		if !strings.Contains(mails[0].Data, want) {
			t.Errorf("mail lacks %q:\n%s", want, mails[0].Data)
		}
	}
}
