// Package smtptest is an SMTP server for tests (github.com/emersion/go-smtp): it keeps
// every mail and recipient, or refuses every recipient with a given code. The email
// channel's tests in controlplane/notify and the control plane's in controlplane/server
// share it. Only tests import it.
package smtptest

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"
)

// Mail is one accepted mail: its recipients (RCPT TO, in order) and its text.
type Mail struct {
	To   []string
	Data string
}

// Sink is the server's record. Use its methods; they lock.
type Sink struct {
	mu      sync.Mutex
	mails   []Mail
	rcpts   []string
	refuse  int
	arrived chan struct{}
}

// Start serves a Sink on a loopback port until the test ends and returns it with its
// host:port.
func Start(t testing.TB) (*Sink, string) {
	t.Helper()
	sink := &Sink{arrived: make(chan struct{}, 1)}
	srv := gosmtp.NewServer(backend{sink})
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return sink, ln.Addr().String()
}

// Refuse makes every later RCPT TO fail with code (0: accept again).
func (k *Sink) Refuse(code int) {
	k.mu.Lock()
	k.refuse = code
	k.mu.Unlock()
}

// Reset forgets the mails and recipients kept so far.
func (k *Sink) Reset() {
	k.mu.Lock()
	k.mails, k.rcpts = nil, nil
	k.mu.Unlock()
}

// Mails is a copy of the mails accepted so far, in order.
func (k *Sink) Mails() []Mail {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.mails)
}

// Rcpts is every recipient accepted so far, across mails, in order.
func (k *Sink) Rcpts() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.rcpts)
}

// WaitFor waits until n mails were accepted (at most 30 s, then the test fails) and returns
// them.
func (k *Sink) WaitFor(t testing.TB, n int) []Mail {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if m := k.Mails(); len(m) >= n {
			return m
		}
		select {
		case <-k.arrived:
		case <-deadline:
			t.Fatalf("the SMTP server got %d mails, want %d", len(k.Mails()), n)
		}
	}
}

type backend struct{ k *Sink }

func (b backend) NewSession(*gosmtp.Conn) (gosmtp.Session, error) { return &session{k: b.k}, nil }

type session struct {
	k  *Sink
	to []string
}

func (s *session) Reset()                                 { s.to = nil }
func (s *session) Logout() error                          { return nil }
func (s *session) Mail(string, *gosmtp.MailOptions) error { return nil }

func (s *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	if s.k.refuse != 0 {
		return &gosmtp.SMTPError{Code: s.k.refuse, Message: "mailbox unavailable"}
	}
	s.k.rcpts = append(s.k.rcpts, to)
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.k.mu.Lock()
	s.k.mails = append(s.k.mails, Mail{To: s.to, Data: string(b)})
	s.k.mu.Unlock()
	select {
	case s.k.arrived <- struct{}{}:
	default:
	}
	return err
}
