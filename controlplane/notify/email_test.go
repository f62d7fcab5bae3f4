package notify_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/smtptest"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// The email channel sends one plain-text mail per event to every recipient, with the
// gate's facts and page; a 5xx refusal is permanent, a 4xx is retried.
func TestEmailChannelMailsTheDecision(t *testing.T) {
	sink, addr := smtptest.Start(t)
	c, err := notify.ParseConfig([]byte("channels:\n  - name: mail\n    kind: email\n    smtp: "+addr+
		"\n    from: rbook@example.com\n    to: [requester@example.com, ops@example.com]\ndefault: {channels: [mail]}\n"), "n.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	m := notify.Message{ID: "gate.decided:ap-1", Kind: store.EventGateDecided, At: time.Date(2026, 5, 12, 10, 0, 0, 0, time.UTC),
		Data: store.EventData{RunID: "R1", Runbook: "deploy-web", StartedBy: "alice", Gate: &store.GateData{ApprovalID: "ap-1", Node: "approve",
			Status: "approved", ApprovalsRequired: 2, Approvals: 2, DecidedBy: "alice, bob", Channel: "rpc", Reason: "ship it",
			ApprovalURL: "https://rbook.example.com/approvals/ap-1"}}}
	ch := c.Channels["mail"]
	id, err := ch.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	mails := sink.Mails()
	mail, rcpts := mails[0].Data, strings.Join(sink.Rcpts(), ",")
	for _, want := range []string{"Subject: Gate approve (deploy-web) approved", "Message-ID: " + id, "Decided by: alice, bob via rpc",
		"Reason: ship it", "Gate page: https://rbook.example.com/approvals/ap-1"} {
		if !strings.Contains(mail, want) {
			t.Errorf("mail lacks %q:\n%s", want, mail)
		}
	}
	if rcpts != "requester@example.com,ops@example.com" || id == "" {
		t.Errorf("recipients %s, message id %q", rcpts, id)
	}
	for code, permanent := range map[int]bool{550: true, 451: false} {
		sink.Refuse(code)
		_, err := ch.Send(context.Background(), m)
		var se *notify.SendError
		if !errors.As(err, &se) || notify.IsPermanent(err) != permanent {
			t.Errorf("refusal %d = %v, want permanent %v", code, err, permanent)
		}
	}
}

// With to_requester, the run's starter is mailed a gate's outcome and the run's end, not its
// opening; a channel with nobody to tell of an event sends nothing.
func TestEmailTellsTheRequesterOfTheDecision(t *testing.T) {
	sink, addr := smtptest.Start(t)
	c, err := notify.ParseConfig([]byte("channels:\n  - name: mail\n    kind: email\n    smtp: "+addr+
		"\n    from: rbook@example.com\n    to_requester: true\ndefault: {channels: [mail]}\n"), "n.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	gate := &store.GateData{ApprovalID: "ap-1", Node: "approve", Status: "approved", ApprovalsRequired: 1, Approvals: 1, DecidedBy: "bob"}
	for _, tc := range []struct {
		kind string
		want string
	}{{store.EventGateOpened, ""}, {store.EventVoteCast, ""}, {store.EventGateDecided, "alice@example.com"}, {store.EventRunFailed, "alice@example.com"}} {
		sink.Reset()
		m := notify.Message{ID: tc.kind + ":ap-1", Kind: tc.kind, At: time.Now(), RequesterEmail: "alice@example.com",
			Data: store.EventData{RunID: "R1", Runbook: "deploy-web", Gate: gate}}
		if _, err := c.Channels["mail"].Send(context.Background(), m); err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		got := strings.Join(sink.Rcpts(), ",")
		if got != tc.want {
			t.Errorf("%s mailed %q, want %q", tc.kind, got, tc.want)
		}
	}
}

// The gate policy's people are mailed only gate events: the approvers by a channel with
// to_approvers, the notify list by every email channel; each address once, whatever its case.
func TestEmailMailsTheGatePolicysPeopleOfGateEvents(t *testing.T) {
	sink, addr := smtptest.Start(t)
	c, err := notify.ParseConfig([]byte("channels:\n  - name: approvers\n    kind: email\n    smtp: "+addr+
		"\n    from: rbook@example.com\n    to_approvers: true\n  - name: plain\n    kind: email\n    smtp: "+addr+
		"\n    from: rbook@example.com\n    to: [ops@example.com]\ndefault: {channels: [approvers, plain]}\n"), "n.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	gate := &store.GateData{ApprovalID: "ap-1", Node: "approve", Status: "pending", ApprovalsRequired: 1}
	for _, tc := range []struct {
		channel, kind, want string
	}{
		{"approvers", store.EventGateOpened, "alice@example.com,carol@example.com,ops@example.com"},
		{"approvers", store.EventVoteCast, "alice@example.com,carol@example.com,ops@example.com"},
		{"approvers", store.EventGateEscalated, "alice@example.com,carol@example.com,ops@example.com"},
		{"approvers", store.EventRunFailed, ""},
		{"plain", store.EventGateOpened, "ops@example.com,carol@example.com"},
		{"plain", store.EventRunFailed, "ops@example.com"},
	} {
		sink.Reset()
		m := notify.Message{ID: tc.kind + ":ap-1", Kind: tc.kind, At: time.Now(), Data: store.EventData{RunID: "R1", Runbook: "deploy-web", Gate: gate},
			ApproverEmails: []string{"alice@example.com", "Carol@example.com"}, NotifyEmails: []string{"carol@example.com", "OPS@example.com"}}
		if _, err := c.Channels[tc.channel].Send(context.Background(), m); err != nil {
			t.Fatalf("%s %s: %v", tc.channel, tc.kind, err)
		}
		if got := strings.ToLower(strings.Join(sink.Rcpts(), ",")); got != tc.want {
			t.Errorf("%s mailed %s to %q, want %q", tc.channel, tc.kind, got, tc.want)
		}
	}
	if _, err := notify.ParseConfig([]byte("channels:\n  - name: m\n    kind: email\n    smtp: "+addr+
		"\n    from: rbook@example.com\n    to_approvers: yes please\ndefault: {channels: [m]}\n"), "n.yaml", testEnv); err == nil ||
		!strings.Contains(err.Error(), "n.yaml:6: channels[0].to_approvers: want true or false") {
		t.Errorf("a to_approvers that is no boolean: err = %v", err)
	}
}
