package server_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/smtptest"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// gatePeople is the people directory of the gate-policy recipient tests: alice, bob and
// dave have email identities, nomail has none; groups sre (bob, nomail) and oncall (alice,
// dave).
func gatePeople(t *testing.T) *people.Directory {
	t.Helper()
	dir, err := people.Parse([]byte(`people:
  - id: alice
    identities: [alice, "email:alice@example.com"]
  - id: bob
    identities: ["github:bob", "email:bob@example.com"]
  - id: dave
    identities: ["email:dave@example.com"]
  - id: nomail
    identities: [nomail]
groups:
  sre: [bob, nomail]
  oncall: [alice, dave]
`), "people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// An email channel with to_approvers mails a gate's opening to the approvers its policy
// names — a person and a people-directory group expanded to their email identities, an
// address identity as itself — and the rule's notify list, each address once
// (docs/notifications.md, "Who a gate's policy notifies").
func TestGatePolicyApproversAndNotifyListAreMailed(t *testing.T) {
	sink, addr := smtptest.Start(t)
	dir := gatePeople(t)
	pol, err := approval.ParseGatePolicy([]byte(`rules:
  - gate: approve
    approvers: ["person:alice", "group:sre", "erin@example.com", "zed"]
    notify: ["group:oncall", "email:ops@example.com"]
`), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := notify.ParseConfig([]byte(fmt.Sprintf(`channels:
  - name: mail
    kind: email
    smtp: %s
    from: rbook@example.com
    to_approvers: true
routes:
  - events: [gate.opened]
    channels: [mail]
`, addr)), "notify.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(openStore(t, filepath.Join(t.TempDir(), "cp.db")), server.Options{Secret: []byte(testSecret),
		Logger: slog.New(slog.DiscardHandler), Notify: &server.NotifyOptions{Config: cfg}, People: dir, GatePolicy: pol})
	if err != nil {
		t.Fatal(err)
	}
	c := newClients(serveHandler(t, h))
	startRun(t, c, "R1")
	gate(t, c, "R1", time.Hour)
	mails := sink.WaitFor(t, 1)
	want := []string{"alice@example.com", "bob@example.com", "erin@example.com", "dave@example.com", "ops@example.com"}
	if !slices.Equal(mails[0].To, want) {
		t.Errorf("gate.opened went to %v, want %v", mails[0].To, want)
	}
	if !strings.Contains(mails[0].Data, "Subject: Approval needed: approve (demo)") || !strings.Contains(mails[0].Data, "Approvals: 0 of 1") {
		t.Errorf("mail:\n%s", mails[0].Data)
	}
}

// rbook serve warns about notify entries that reach nobody: a person the directory lacks or
// who has no email identity, a group it lacks or whose members have none.
func TestNotifyListWarningsNameEntriesWithoutAnAddress(t *testing.T) {
	pol, err := approval.ParseGatePolicy([]byte(`rules:
  - gate: approve
    notify: ["person:alice", "person:nomail", "person:ghost", "group:sre", "group:nobody", "email:ops@example.com"]
`), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := server.NotifyListWarnings(pol, gatePeople(t))
	want := []string{
		`gates.yaml rule 1 (line 2): notify "person:nomail" has no email: identity in the people directory, so it is mailed nothing`,
		`gates.yaml rule 1 (line 2): notify "person:ghost" is not a person of the people directory (--people), so it is mailed nothing`,
		`gates.yaml rule 1 (line 2): notify "group:nobody" is no group of the people directory (--people) with a member who has an email: identity, so it is mailed nothing`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
