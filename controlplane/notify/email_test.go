package notify_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// smtpSink is an SMTP server (go-smtp) that keeps every mail, or refuses every recipient
// with code while refuse is set.
type smtpSink struct {
	mu     sync.Mutex
	mails  []string
	rcpts  []string
	refuse int
}

func (k *smtpSink) NewSession(*gosmtp.Conn) (gosmtp.Session, error) { return &smtpSession{k: k}, nil }

type smtpSession struct{ k *smtpSink }

func (s *smtpSession) Reset()                                 {}
func (s *smtpSession) Logout() error                          { return nil }
func (s *smtpSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (s *smtpSession) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	if s.k.refuse != 0 {
		return &gosmtp.SMTPError{Code: s.k.refuse, Message: "mailbox unavailable"}
	}
	s.k.rcpts = append(s.k.rcpts, to)
	return nil
}
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.k.mu.Lock()
	s.k.mails = append(s.k.mails, string(b))
	s.k.mu.Unlock()
	return err
}

// startSMTP serves an smtpSink on a loopback port until the test ends and returns it with
// its host:port.
func startSMTP(t *testing.T) (*smtpSink, string) {
	t.Helper()
	sink := &smtpSink{}
	srv := gosmtp.NewServer(sink)
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return sink, ln.Addr().String()
}

// The email channel sends one plain-text mail per event to every recipient, with the
// gate's facts and page; a 5xx refusal is permanent, a 4xx is retried.
func TestEmailChannelMailsTheDecision(t *testing.T) {
	sink, addr := startSMTP(t)
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
	sink.mu.Lock()
	mail, rcpts := strings.Join(sink.mails, ""), strings.Join(sink.rcpts, ",")
	sink.mu.Unlock()
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
		sink.mu.Lock()
		sink.refuse = code
		sink.mu.Unlock()
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
	sink, addr := startSMTP(t)
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
		sink.mu.Lock()
		sink.rcpts = nil
		sink.mu.Unlock()
		m := notify.Message{ID: tc.kind + ":ap-1", Kind: tc.kind, At: time.Now(), RequesterEmail: "alice@example.com",
			Data: store.EventData{RunID: "R1", Runbook: "deploy-web", Gate: gate}}
		if _, err := c.Channels["mail"].Send(context.Background(), m); err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		sink.mu.Lock()
		got := strings.Join(sink.rcpts, ",")
		sink.mu.Unlock()
		if got != tc.want {
			t.Errorf("%s mailed %q, want %q", tc.kind, got, tc.want)
		}
	}
}
