package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/slackapi"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// DefaultSlackAPIURL is Slack's Web API base URL (https://docs.slack.dev/apis/web-api/); a
// slack channel's api_url replaces it (a test's fake Slack, an enterprise gateway).
const DefaultSlackAPIURL = "https://slack.com/api/"

// The action ids of the gate message's buttons and the callback ids of the modals they open
// (docs/slack.md, "What the messages look like"); the control plane's interaction endpoint
// dispatches on them.
const (
	SlackActionApprove = "rbook_approve"
	SlackActionReject  = "rbook_reject"
	SlackActionOpen    = "rbook_open"
	SlackModalApprove  = "rbook_approve_modal"
	SlackModalReject   = "rbook_reject_modal"
	// SlackReasonBlock and SlackRedoBlock are the reject modal's input blocks (the reason,
	// and the node to send the run back to); SlackInputBlockPrefix + a field's name is the
	// approve modal's block of that approver input. Every input's action id is SlackValueAction.
	SlackReasonBlock      = "reason"
	SlackRedoBlock        = "redo_from"
	SlackInputBlockPrefix = "input_"
	SlackValueAction      = "value"
)

// Slack posts one message per gate to a Slack channel with a bot token (Web API
// chat.postMessage, Block Kit), updates it in place (chat.update) as votes arrive and when
// the gate closes, and replies in its thread with the run's later events
// (docs/slack.md). Its messages are rendered from the gate's state in the store when each
// delivery is sent, so deliveries are idempotent and their order does not matter. Bind must
// be called before Send.
type Slack struct {
	name, channel, token, signingSecret, apiURL string
	api                                         *slackapi.Client
	st                                          *store.Store
	gate                                        func(ctx context.Context, approvalID string) (SlackGate, error)
}

// NewSlack is a Slack channel named name posting to the Slack channel id channel with the
// bot token, verifying interaction requests with signingSecret, through the Web API at
// apiURL ("" means DefaultSlackAPIURL; a trailing slash is added).
func NewSlack(name, channel, token, signingSecret, apiURL string) *Slack {
	if apiURL == "" {
		apiURL = DefaultSlackAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	s := &Slack{name: name, channel: channel, token: token, signingSecret: signingSecret, apiURL: apiURL}
	s.api = slackapi.New(token, apiURL, &http.Client{Timeout: RequestTimeout})
	return s
}

// Name implements Channel.
func (s *Slack) Name() string { return s.name }

// Kind implements Channel.
func (s *Slack) Kind() string { return "slack" }

// SlackChannel is the Slack channel id messages are posted to.
func (s *Slack) SlackChannel() string { return s.channel }

// SigningSecret is the Slack app's signing secret, which verifies interaction requests
// (slackapi.Verify). Never log it.
func (s *Slack) SigningSecret() string { return s.signingSecret }

// API is the Web API client with the bot token (chat.postEphemeral, views.open).
func (s *Slack) API() *slackapi.Client { return s.api }

// Bind gives the channel the store that keeps its messages (store.SlackMessage) and gate,
// which reads a gate's current state as its message shows it.
func (s *Slack) Bind(st *store.Store, gate func(ctx context.Context, approvalID string) (SlackGate, error)) {
	s.st, s.gate = st, gate
}

// SlackGate is a gate as its Slack message shows it, read when the message is rendered.
type SlackGate struct {
	ApprovalID, Node, Prompt string
	// Status is pending, approved, rejected, expired or cancelled.
	Status string
	// ApprovalsRequired is M of M-of-N; Approvals the distinct people who approved so far.
	ApprovalsRequired, Approvals int
	// Votes are the votes cast, in order.
	Votes []SlackVote
	// Deadline is when the gate times out (zero: none).
	Deadline time.Time
	// DecidedBy, DecidedAt, Channel and Reason say who closed the gate ("Alice Example
	// (slack:T1/U1)"), when, through which channel ("slack", "rpc", "deadline", …) and why.
	DecidedBy string
	DecidedAt time.Time
	Channel   string
	Reason    string
	// RedoFrom is the node a rejection sent the run back to ("" for none; docs/push-back.md).
	RedoFrom string
	// URL is the gate's page on the console ("" without --public-url).
	URL string
}

// SlackVote is one vote as the message shows it.
type SlackVote struct {
	// Who is "Alice Example (slack:T1/U1)": the person's name and the identity that voted.
	Who     string
	Verdict string
	Channel string
	Reason  string
	At      time.Time
}

// errNotBound is Send before Bind: a wiring error, retried until the server binds it.
var errNotBound = errors.New("the Slack channel is not bound to the control plane's store")

// Send implements Channel. gate.opened posts the gate's message (or, when a message was
// already kept for the gate, updates it) and keeps its ts; the gate's other events update that
// message, rendered from the gate's current state; while the message is not posted yet and
// its gate.opened delivery is still waiting, such an update fails and is retried. Without a
// kept message and no gate.opened to wait for (a route that does not send it here) the first
// gate event posts the message. gate.escalated also replies in the message's thread. Run
// events reply in the thread of each of the run's gate messages in this channel (a message
// of its own when there is none). It returns the message's ts.
func (s *Slack) Send(ctx context.Context, m Message) (string, error) {
	if s.st == nil || s.gate == nil {
		return "", errNotBound
	}
	g := m.Data.Gate
	if g == nil {
		return s.sendRunEvent(ctx, m)
	}
	ref, ok, err := s.st.SlackMessage(ctx, g.ApprovalID, s.name)
	if err != nil {
		return "", err
	}
	if !ok && m.Kind != store.EventGateOpened {
		waiting, err := s.st.GateOpenedWaiting(ctx, g.ApprovalID, s.name)
		if err != nil {
			return "", err
		}
		if waiting {
			return "", &SendError{Msg: "the gate's Slack message is not posted yet (its gate.opened delivery is still waiting); retrying after it"}
		}
	}
	view, err := s.gate(ctx, g.ApprovalID)
	if err != nil {
		return "", err
	}
	text, blocks := SlackGateMessage(m.Data, view)
	if !ok {
		ch, ts, err := s.api.PostMessage(ctx, s.channel, text, blocks, "")
		if err != nil {
			return "", slackError("chat.postMessage", err)
		}
		// A crash between the post and this write posts the message again on the next
		// attempt (at least once; docs/slack.md, "Delivery").
		if ref, err = s.st.SaveSlackMessage(ctx, g.ApprovalID, s.name, m.Data.RunID, store.SlackMessageRef{SlackChannel: ch, TS: ts}); err != nil {
			return "", err
		}
		return ref.TS, nil
	}
	if err := s.api.UpdateMessage(ctx, ref.SlackChannel, ref.TS, text, blocks); err != nil {
		return "", slackError("chat.update", err)
	}
	if m.Kind == store.EventGateEscalated && g.Escalation != nil {
		reply := fmt.Sprintf("Still waiting for approval: escalated (step %d, after %s).", g.Escalation.Step, g.Escalation.After)
		if _, _, err := s.api.PostMessage(ctx, ref.SlackChannel, reply, nil, ref.TS); err != nil {
			return "", slackError("chat.postMessage", err)
		}
	}
	return ref.TS, nil
}

// sendRunEvent replies with a run event in the thread of each of the run's gate messages.
func (s *Slack) sendRunEvent(ctx context.Context, m Message) (string, error) {
	refs, err := s.st.SlackMessagesOfRun(ctx, m.Data.RunID, s.name)
	if err != nil {
		return "", err
	}
	title, _ := Summary(m)
	text := slackEscape(title)
	if len(refs) == 0 {
		_, ts, err := s.api.PostMessage(ctx, s.channel, text, nil, "")
		return ts, slackError("chat.postMessage", err)
	}
	var last string
	for _, ref := range refs {
		_, ts, err := s.api.PostMessage(ctx, ref.SlackChannel, text, nil, ref.TS)
		if err != nil {
			return "", slackError("chat.postMessage", err)
		}
		last = ts
	}
	return last, nil
}

// slackPermanent are Web API errors that retrying the same call does not fix
// (https://docs.slack.dev/reference/methods/chat.postMessage, "Errors").
var slackPermanent = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true, "token_expired": true,
	"channel_not_found": true, "not_in_channel": true, "is_archived": true, "missing_scope": true,
	"invalid_blocks": true, "invalid_blocks_format": true, "msg_too_long": true, "no_text": true,
	"message_not_found": true, "cant_update_message": true, "edit_window_closed": true, "restricted_action": true,
}

// slackError turns a Web API error into a *SendError saying which method failed and Slack's
// answer (never the token); nil stays nil.
func slackError(method string, err error) error {
	if err == nil {
		return nil
	}
	var se *slackapi.APIError
	var sc *slackapi.StatusError
	var rl *slackapi.RateLimitedError
	switch {
	case errors.As(err, &se):
		return &SendError{Permanent: slackPermanent[se.Err], Msg: fmt.Sprintf("Slack %s answered %s", method, se.Err)}
	case errors.As(err, &sc):
		return &SendError{Status: sc.Code, Permanent: sc.Code >= 400 && sc.Code < 500 && sc.Code != 408 && sc.Code != 429,
			Msg: fmt.Sprintf("Slack %s answered HTTP %s", method, sc.Status)}
	case errors.As(err, &rl):
		return &SendError{Status: http.StatusTooManyRequests, Msg: fmt.Sprintf("Slack %s is rate limited; retry after %s", method, rl.RetryAfter)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &SendError{Msg: fmt.Sprintf("Slack %s failed: %v", method, err)}
}

// slackEscape escapes the three characters Slack's mrkdwn and plain text treat as markup
// (https://docs.slack.dev/messaging/formatting-message-text#escaping).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackTime is t as Slack shows a date in each reader's time zone, with the UTC time as the
// fallback text (https://docs.slack.dev/messaging/formatting-message-text#date-formatting).
func slackTime(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format(time.RFC3339))
}

// clipRunes cuts s to at most n runes, marking a cut with "…" (Block Kit limits text lengths).
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// slackTitles are the message titles by gate status.
var slackTitles = map[string]string{
	"pending": "Approval needed", "approved": "Approved", "rejected": "Rejected",
	"expired": "Expired", "cancelled": "Withdrawn",
}

// SlackGateMessage renders a gate's message: the fallback text (notifications, screen
// readers) and the Block Kit blocks — a header; the prompt; the run, runbook, environment,
// repository, tally ("1 of 2: Alice Example (slack:T1/U1)") and deadline; each vote; when
// closed, who decided, when, through which channel and why; then a button to the gate's page
// (when there is a URL) and, while pending, Approve and Reject buttons whose value is the
// approval id.
func SlackGateMessage(d store.EventData, g SlackGate) (string, []slackapi.Block) {
	title := slackTitles[g.Status]
	if title == "" {
		title = g.Status
	}
	if g.Status == "rejected" && g.Channel == store.SourceDeadline {
		title = "Timed out"
	}
	head := fmt.Sprintf("%s: %s (%s)", title, g.Node, d.Runbook)
	text := head
	blocks := []slackapi.Block{slackapi.NewHeader(slackapi.NewText(slackapi.PlainTextType, clipRunes(head, 150), false, false))}
	if g.Prompt != "" {
		blocks = append(blocks, slackapi.NewSection(slackapi.NewText(slackapi.MarkdownType, clipRunes(slackEscape(g.Prompt), 3000), false, true), nil))
	}
	field := func(label, value string) *slackapi.TextObject {
		return slackapi.NewText(slackapi.MarkdownType, clipRunes("*"+label+"*\n"+value, 2000), false, true)
	}
	fields := []*slackapi.TextObject{field("Run", slackEscape(d.RunID)), field("Runbook", slackEscape(d.Runbook))}
	if d.Environment != "" {
		fields = append(fields, field("Environment", slackEscape(d.Environment)))
	}
	if d.Repository != "" {
		fields = append(fields, field("Repository", slackEscape(d.Repository)))
	}
	fields = append(fields, field("Approvals", SlackTally(g)))
	if !g.Deadline.IsZero() && g.Status == "pending" {
		fields = append(fields, field("Deadline", slackTime(g.Deadline)))
	}
	blocks = append(blocks, slackapi.NewSection(nil, fields))
	if len(g.Votes) > 0 {
		var lines []string
		for _, v := range g.Votes {
			line := fmt.Sprintf("%s %s via %s, %s", slackEscape(v.Who), v.Verdict, slackEscape(v.Channel), slackTime(v.At))
			if v.Reason != "" {
				line += ": " + slackEscape(v.Reason)
			}
			lines = append(lines, line)
		}
		blocks = append(blocks, slackapi.NewContext("rbook_votes",
			slackapi.NewText(slackapi.MarkdownType, clipRunes("Votes: "+strings.Join(lines, "\n"), 3000), false, true)))
	}
	if g.Status != "pending" {
		by := g.DecidedBy
		if by == "" {
			by = "rbook"
		}
		line := fmt.Sprintf("*%s* by %s", title, slackEscape(by))
		if g.Channel != "" {
			line += " via " + slackEscape(g.Channel)
		}
		if !g.DecidedAt.IsZero() {
			line += ", " + slackTime(g.DecidedAt)
		}
		if g.Reason != "" {
			line += "\nReason: " + slackEscape(g.Reason)
		}
		if g.RedoFrom != "" {
			line += "\nSent back to " + slackEscape(g.RedoFrom)
		}
		text += fmt.Sprintf(" by %s", by)
		blocks = append(blocks, slackapi.NewSection(slackapi.NewText(slackapi.MarkdownType, clipRunes(line, 3000), false, true), nil))
	}
	var buttons []any
	if g.URL != "" {
		open := slackapi.NewButton(SlackActionOpen, g.ApprovalID, slackapi.NewText(slackapi.PlainTextType, "Open the gate", false, false))
		open.URL = g.URL
		buttons = append(buttons, open)
	}
	if g.Status == "pending" {
		approve := slackapi.NewButton(SlackActionApprove, g.ApprovalID, slackapi.NewText(slackapi.PlainTextType, "Approve", false, false))
		reject := slackapi.NewButton(SlackActionReject, g.ApprovalID, slackapi.NewText(slackapi.PlainTextType, "Reject", false, false))
		approve.Style, reject.Style = slackapi.StylePrimary, slackapi.StyleDanger
		buttons = append(buttons, approve, reject)
	}
	if len(buttons) > 0 {
		blocks = append(blocks, slackapi.NewActions("rbook_gate", buttons...))
	}
	return text, blocks
}

// SlackTally is the gate's tally as the message shows it: "0 of 2", "1 of 2: Alice Example
// (slack:T1/U1)" (the approvers so far, in vote order).
func SlackTally(g SlackGate) string {
	t := fmt.Sprintf("%d of %d", g.Approvals, max(g.ApprovalsRequired, 1))
	var who []string
	for _, v := range g.Votes {
		if v.Verdict == "approved" {
			who = append(who, slackEscape(v.Who))
		}
	}
	if len(who) > 0 {
		t += ": " + strings.Join(who, ", ")
	}
	return t
}

// SlackModalMeta is what a modal carries (its private_metadata, JSON): the gate, and the
// Slack channel of the message whose button opened it, where refusals are answered.
type SlackModalMeta struct {
	ApprovalID string `json:"approval_id"`
	Channel    string `json:"channel"`
}

func modalMeta(m SlackModalMeta) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func plain(s string, n int) *slackapi.TextObject {
	return slackapi.NewText(slackapi.PlainTextType, clipRunes(s, n), false, false)
}

// SlackApproveModal is the modal the Approve button opens on a gate that declares approver
// inputs (docs/approver-inputs.md): one input block per field (block id
// SlackInputBlockPrefix+name, action id SlackValueAction), a text field for a string or a
// number, a menu of the options for one of a list, true/false for a boolean, prefilled with
// the default, optional unless the field is required without a default, its description as
// the hint.
func SlackApproveModal(meta SlackModalMeta, node string, fields []gateinputs.Field) slackapi.ModalView {
	blocks := []slackapi.Block{slackapi.NewSection(slackapi.NewText(slackapi.MarkdownType,
		clipRunes("Approve *"+slackEscape(node)+"* with these values:", 3000), false, true), nil)}
	for _, f := range fields {
		var el any
		switch f.Type {
		case gateinputs.TypeBoolean, gateinputs.TypeEnum:
			opts := f.Options
			if f.Type == gateinputs.TypeBoolean {
				opts = []string{"true", "false"}
			}
			var options []*slackapi.Option
			var initial *slackapi.Option
			for _, o := range opts {
				ob := slackapi.NewOption(clipRunes(o, 150), plain(o, 75))
				if f.HasDefault && o == f.Default {
					initial = ob
				}
				options = append(options, ob)
			}
			sel := slackapi.NewStaticSelect(plain("Choose", 150), SlackValueAction, options...)
			sel.InitialOption = initial
			el = sel
		default:
			in := slackapi.NewPlainTextInput(SlackValueAction)
			if f.HasDefault {
				in.InitialValue = f.Default
			}
			el = in
		}
		var hint *slackapi.TextObject
		if f.Description != "" {
			hint = plain(f.Description, 2000)
		}
		label := f.Name
		if f.Type == gateinputs.TypeNumber {
			label += " (a number)"
		}
		blocks = append(blocks, slackapi.NewInput(SlackInputBlockPrefix+f.Name, plain(label, 2000), hint, el, !f.Required || f.HasDefault))
	}
	return slackapi.ModalView{Type: "modal", Title: plain("Approve gate", 24), Submit: plain("Approve", 24),
		Close: plain("Cancel", 24), CallbackID: SlackModalApprove, PrivateMetadata: modalMeta(meta), Blocks: blocks}
}

// SlackRejectModal is the modal the Reject button opens: a required reason (block
// SlackReasonBlock) and, when the gate's node declares rewind targets, an optional "Send back
// to" menu of them (block SlackRedoBlock), whose choice becomes RejectRequest.redo_from.
func SlackRejectModal(meta SlackModalMeta, node string, rewindTargets []string) slackapi.ModalView {
	blocks := []slackapi.Block{
		slackapi.NewInput(SlackReasonBlock, plain("Why reject "+node+"?", 2000), nil,
			&slackapi.PlainTextInput{Type: "plain_text_input", ActionID: SlackValueAction, MaxLength: 1000}, false),
	}
	if len(rewindTargets) > 0 {
		var options []*slackapi.Option
		for _, t := range rewindTargets {
			options = append(options, slackapi.NewOption(clipRunes(t, 150), plain(t, 75)))
		}
		blocks = append(blocks, slackapi.NewInput(SlackRedoBlock, plain("Send back to", 2000),
			plain("Leave empty to fail the run; choose a node to send the run back to it with your reason.", 2000),
			slackapi.NewStaticSelect(plain("Choose a node", 150), SlackValueAction, options...), true))
	}
	return slackapi.ModalView{Type: "modal", Title: plain("Reject gate", 24), Submit: plain("Reject", 24),
		Close: plain("Cancel", 24), CallbackID: SlackModalReject, PrivateMetadata: modalMeta(meta), Blocks: blocks}
}

// slackChannel parses a slack channel's fields (docs/slack.md, "Configuration"): channel (a
// Slack channel id), the bot token and the signing secret from an environment variable or a
// file, and an optional api_url.
func (p *parser) slackChannel(n *yaml.Node, field, name string, vals map[string]*yaml.Node, oneOf func(a, b string) (string, error)) (Channel, error) {
	if vals["channel"] == nil {
		return nil, p.errAt(n, "%s: a slack channel needs channel (a Slack channel id such as C0123ABCD: the channel's details show it)", field)
	}
	ch, err := p.str(vals["channel"], field+".channel")
	if err != nil {
		return nil, err
	}
	if !slackChannelRE.MatchString(ch) {
		return nil, p.errAt(vals["channel"], "%s.channel: %q is not a Slack channel id (like C0123ABCD; open the channel's details in Slack to copy it, not its #name)", field, ch)
	}
	token, err := oneOf("bot_token_env", "bot_token_file")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(token, "xoxb-") {
		at := vals["bot_token_env"]
		if at == nil {
			at = vals["bot_token_file"]
		}
		return nil, p.errAt(at, "%s: the bot token does not start with xoxb-: use the app's Bot User OAuth Token (OAuth & Permissions)", field)
	}
	secret, err := oneOf("signing_secret_env", "signing_secret_file")
	if err != nil {
		return nil, err
	}
	api := ""
	if v := vals["api_url"]; v != nil {
		if api, err = p.httpURL(v, field+".api_url"); err != nil {
			return nil, err
		}
	}
	return NewSlack(name, ch, token, secret, api), nil
}

// slackChannelRE is a Slack conversation id: C (public), G (private) or D (direct message),
// then upper-case letters and digits.
var slackChannelRE = lazyregexp.New(`^[CGD][A-Z0-9]{2,30}$`)
