package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

// RequestTimeout bounds one attempt of a channel (an HTTP POST, an SMTP conversation).
const RequestTimeout = 15 * time.Second

// Message is one event as a channel sends it.
type Message struct {
	// ID is the event's stable id (store.NotificationEvent.ID): the same on every attempt,
	// so a receiver de-duplicates on it (a webhook's webhook-id).
	ID string
	// Kind is the event kind (store.EventGateOpened, …).
	Kind string
	// At is when the change the event reports was committed.
	At   time.Time
	Data store.EventData
	// RequesterEmail is the email address of the run's starter ("" when unknown): an email
	// channel with to_requester tells them of the decision and of the run's end.
	RequesterEmail string
	// ApproverEmails are the addresses of the approvers the gate's policy names (people and
	// groups expanded through the people directory; docs/notifications.md, "Who a gate's
	// policy notifies"), for gate events; an email channel with to_approvers mails them.
	ApproverEmails []string
	// NotifyEmails are the addresses of the gate policy rule's notify list, for gate events;
	// every email channel a gate event is routed to mails them.
	NotifyEmails []string
	// GateMessageID is what this channel returned when it sent the gate's gate.opened event
	// ("" when none or not a gate event): a channel that updates its message in place (a
	// chat message showing the tally) edits that one instead of posting again.
	GateMessageID string
}

// Channel sends messages to one configured receiver.
type Channel interface {
	// Name is the channel's configured name (routes and delivery records use it).
	Name() string
	// Kind is "webhook", "teams", "email" or "slack".
	Kind() string
	// Send delivers m once. It returns the provider's id of the message it created ("" when
	// the provider gives none), kept with the delivery for later updates. An error is
	// retried with back-off; a *SendError with Permanent set is given up sooner.
	Send(ctx context.Context, m Message) (providerMessageID string, err error)
}

// SendError is a refusal by the receiver: Status is the HTTP status (0 for other
// protocols) and Permanent says that retrying the same message will not help (a 4xx other
// than 408 and 429, an SMTP 5xx).
type SendError struct {
	Status    int
	Permanent bool
	Msg       string
}

// Error implements error: the receiver's answer, never the URL or a secret.
func (e *SendError) Error() string { return e.Msg }

// IsPermanent reports whether err is a permanent refusal (SendError.Permanent).
func IsPermanent(err error) bool {
	var se *SendError
	return errors.As(err, &se) && se.Permanent
}

// WebhookBody is the JSON body of a webhook notification, in the Standard Webhooks
// specification's recommended shape: the event type, when it happened (RFC 3339) and its data.
type WebhookBody struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      store.EventData `json:"data"`
}

// Webhook posts events as JSON signed per the Standard Webhooks specification
// (https://www.standardwebhooks.com, "Signature scheme"): headers webhook-id (the event
// id), webhook-timestamp (Unix seconds of the attempt) and webhook-signature
// ("v1,<base64 HMAC-SHA256 of id.timestamp.body>" keyed with the secret's bytes).
type Webhook struct {
	name, url string
	key       []byte
	// previous is the key a rotation replaced (SetPrevious); nil without one.
	previous []byte
	client   *http.Client
}

// NewWebhook is a webhook channel posting to url, signing with secret ("whsec_<base64>" as
// the specification writes secrets, or the base64 alone; 24 to 64 bytes once decoded).
// Errors say what is wrong with the secret, never its value.
func NewWebhook(name, url, secret string) (*Webhook, error) {
	key, err := webhookKey(secret)
	if err != nil {
		return nil, err
	}
	return &Webhook{name: name, url: url, key: key, client: &http.Client{Timeout: RequestTimeout}}, nil
}

// webhookKey decodes a "whsec_<base64>" secret (or the base64 alone) of 24 to 64 bytes.
func webhookKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil, errors.New("the signing secret is not \"whsec_\" followed by base64: generate one with `echo whsec_$(openssl rand -base64 32)`")
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("the signing secret decodes to %d bytes: the Standard Webhooks specification wants 24 to 64", len(key))
	}
	return key, nil
}

// SetPrevious makes every message carry a second signature, with secret, the signing
// secret a rotation replaced (the Standard Webhooks specification's space-separated
// signatures), so a receiver that still holds only the previous secret verifies it
// (docs/tls.md, "Rotating a notification webhook's signing secret"). Errors: as NewWebhook's.
func (w *Webhook) SetPrevious(secret string) error {
	key, err := webhookKey(secret)
	if err != nil {
		return err
	}
	w.previous = key
	return nil
}

// Name implements Channel.
func (w *Webhook) Name() string { return w.name }

// Kind implements Channel.
func (w *Webhook) Kind() string { return "webhook" }

// Sign is the webhook-signature header value of a message with id, timestamp (Unix
// seconds) and body: "v1,<signature>", then " v1,<signature>" with the previous secret
// when SetPrevious gave one.
func (w *Webhook) Sign(id string, timestamp int64, body []byte) string {
	sig := signWith(w.key, id, timestamp, body)
	if w.previous != nil {
		sig += " " + signWith(w.previous, id, timestamp, body)
	}
	return sig
}

func signWith(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Send implements Channel: one signed POST; a 2xx answer is success.
func (w *Webhook) Send(ctx context.Context, m Message) (string, error) {
	body, err := json.Marshal(WebhookBody{Type: m.Kind, Timestamp: m.At.UTC().Format(time.RFC3339Nano), Data: m.Data})
	if err != nil {
		return "", err
	}
	ts := time.Now().Unix()
	return "", postJSON(ctx, w.client, w.url, body, map[string]string{
		"webhook-id": m.ID, "webhook-timestamp": strconv.FormatInt(ts, 10), "webhook-signature": w.Sign(m.ID, ts, body),
	})
}

// postJSON POSTs body and turns a non-2xx answer into a *SendError. The URL is not in the
// error (a Teams workflow URL carries its signature).
func postJSON(ctx context.Context, c *http.Client, url string, body []byte, headers map[string]string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return errors.New("building the request failed")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "rbook-control-plane")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap() // drop the URL *url.Error names
		}
		return fmt.Errorf("POST failed: %v", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	c4 := resp.StatusCode
	return &SendError{Status: c4, Permanent: c4 >= 400 && c4 < 500 && c4 != 408 && c4 != 429,
		Msg: fmt.Sprintf("receiver answered %s: %s", resp.Status, strings.TrimSpace(string(snippet)))}
}

// Teams posts an Adaptive Card through a Microsoft Teams workflow webhook (the "When a Teams
// webhook request is received" trigger), with a button to the gate's page.
type Teams struct {
	name, url string
	client    *http.Client
}

// Name implements Channel.
func (t *Teams) Name() string { return t.name }

// Kind implements Channel.
func (t *Teams) Kind() string { return "teams" }

// Send implements Channel: one POST of TeamsCard(m); a 2xx answer (Teams answers 202) is
// success.
func (t *Teams) Send(ctx context.Context, m Message) (string, error) {
	body, err := json.Marshal(TeamsCard(m))
	if err != nil {
		return "", err
	}
	c := t.client
	if c == nil {
		c = &http.Client{Timeout: RequestTimeout}
	}
	return "", postJSON(ctx, c, t.url, body, nil)
}

// TeamsCard is the workflow webhook body of m: a message with one Adaptive Card attachment
// (schema 1.4) that says what happened, to which gate and run, and links the gate's page
// (Action.OpenUrl) when the control plane has a public URL.
func TeamsCard(m Message) map[string]any {
	title, facts := Summary(m)
	var factSet []map[string]string
	for _, f := range facts {
		factSet = append(factSet, map[string]string{"title": f[0], "value": f[1]})
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.4",
		"body": []any{
			map[string]any{"type": "TextBlock", "text": title, "weight": "Bolder", "size": "Medium", "wrap": true},
			map[string]any{"type": "FactSet", "facts": factSet},
		},
	}
	if g := m.Data.Gate; g != nil && g.ApprovalURL != "" {
		card["actions"] = []any{map[string]any{"type": "Action.OpenUrl", "title": "Open the gate", "url": g.ApprovalURL}}
	}
	return map[string]any{"type": "message", "attachments": []any{
		map[string]any{"contentType": "application/vnd.microsoft.card.adaptive", "content": card},
	}}
}

// Summary is a one-line title of m and its facts (label, value), for the card and the mail.
func Summary(m Message) (string, [][2]string) {
	d := m.Data
	facts := [][2]string{{"Runbook", d.Runbook}, {"Run", d.RunID}}
	if d.Environment != "" {
		facts = append(facts, [2]string{"Environment", d.Environment})
	}
	if d.Repository != "" {
		facts = append(facts, [2]string{"Repository", d.Repository})
	}
	g := d.Gate
	if g == nil {
		return fmt.Sprintf("rbook run %s of %s %s", d.RunID, d.Runbook, d.Status), facts
	}
	facts = append(facts, [2]string{"Gate", g.Node}, [2]string{"Approvals", fmt.Sprintf("%d of %d", g.Approvals, g.ApprovalsRequired)})
	var title string
	switch m.Kind {
	case store.EventGateOpened:
		title = fmt.Sprintf("Approval needed: %s (%s)", g.Node, d.Runbook)
		if g.Prompt != "" {
			facts = append(facts, [2]string{"Prompt", g.Prompt})
		}
		if g.Deadline != "" {
			facts = append(facts, [2]string{"Deadline", g.Deadline})
		}
	case store.EventGateEscalated:
		title = fmt.Sprintf("Still waiting for approval: %s (%s)", g.Node, d.Runbook)
		if e := g.Escalation; e != nil {
			title += fmt.Sprintf(", escalated (step %d, after %s)", e.Step, e.After)
		}
		if g.Prompt != "" {
			facts = append(facts, [2]string{"Prompt", g.Prompt})
		}
		if g.Deadline != "" {
			facts = append(facts, [2]string{"Deadline", g.Deadline})
		}
	case store.EventVoteCast:
		title = fmt.Sprintf("Vote on %s (%s): %d of %d approvals", g.Node, d.Runbook, g.Approvals, g.ApprovalsRequired)
		if g.Vote != nil {
			facts = append(facts, [2]string{"Vote", fmt.Sprintf("%s by %s via %s", g.Vote.Verdict, g.Vote.Approver, g.Vote.Channel)})
		}
	default:
		title = fmt.Sprintf("Gate %s (%s) %s", g.Node, d.Runbook, g.Status)
		if g.DecidedBy != "" {
			facts = append(facts, [2]string{"Decided by", g.DecidedBy + " via " + g.Channel})
		}
		if g.Reason != "" {
			facts = append(facts, [2]string{"Reason", g.Reason})
		}
	}
	if g.ApprovalURL != "" {
		facts = append(facts, [2]string{"Gate page", g.ApprovalURL})
	}
	return title, facts
}

// Email sends a plain-text mail per event over SMTP (net/smtp: STARTTLS when the server
// offers it; PLAIN auth when a username is configured, which net/smtp allows only over TLS
// or to localhost).
type Email struct {
	name, addr, from   string
	to                 []string
	toRequester        bool
	toApprovers        bool
	username, password string
}

// tellsRequester reports whether an event of kind is one the run's starter is mailed
// (to_requester): a gate's outcome or the run's end, not its opening or votes.
func tellsRequester(kind string) bool {
	switch kind {
	case store.EventGateDecided, store.EventGateExpired, store.EventGateWithdrawn,
		store.EventRunFinished, store.EventRunFailed, store.EventRunCancelled:
		return true
	}
	return false
}

// Name implements Channel.
func (e *Email) Name() string { return e.name }

// Kind implements Channel.
func (e *Email) Kind() string { return "email" }

// Send implements Channel: one SMTP transaction to every configured recipient; the
// Message-ID is derived from the event id, so a retried mail is recognisably the same.
func (e *Email) Send(ctx context.Context, m Message) (string, error) {
	to := e.recipients(m)
	if len(to) == 0 {
		return "", nil // nobody to tell of this event
	}
	title, facts := Summary(m)
	var b strings.Builder
	host := e.addr[:strings.LastIndex(e.addr, ":")]
	msgID := fmt.Sprintf("<%x@rbook>", sha256.Sum256([]byte(m.ID)))
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		e.from, strings.Join(to, ", "), mime.QEncoding.Encode("utf-8", title), msgID, m.At.UTC().Format(time.RFC1123Z))
	b.WriteString(title + "\r\n\r\n")
	for _, f := range facts {
		fmt.Fprintf(&b, "%s: %s\r\n", f[0], strings.ReplaceAll(f[1], "\n", " "))
	}
	if err := e.deliver(ctx, host, to, []byte(b.String())); err != nil {
		var te *textproto.Error
		permanent := errors.As(err, &te) && te.Code >= 500
		return "", &SendError{Permanent: permanent, Msg: "SMTP " + e.addr + ": " + err.Error()}
	}
	return msgID, nil
}

// deliver runs one SMTP transaction within ctx's deadline: STARTTLS when offered, AUTH
// PLAIN when a username is set (net/smtp refuses it without TLS except to localhost).
func (e *Email) deliver(ctx context.Context, host string, to []string, msg []byte) error {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return err
		}
	}
	if e.username != "" {
		if err := c.Auth(smtp.PlainAuth("", e.username, e.password, host)); err != nil {
			return err
		}
	}
	if err := c.Mail(e.from); err != nil {
		return err
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
