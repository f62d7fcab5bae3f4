package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/consolelink"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/slackapi"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// Deciding gates from Slack (docs/slack.md): the interaction endpoint Slack's buttons and
// modals post to, and the gate state the Slack channel renders its messages from.

// SlackInteractionsPath is where the control plane takes Slack's interaction requests (the
// Slack app's Interactivity Request URL is the public URL and this path). It is mounted when
// the notification config has a slack channel.
const SlackInteractionsPath = "/slack/interactions"

// Bounds of the interaction endpoint: a request body is at most maxSlackBody bytes;
// a request's hash is kept slackReplayKeep (more than the five minutes a signature's
// timestamp is accepted for, slackapi.Verify), so a replay within the window is
// recognised on every replica; slackCallTimeout bounds each Web API call made while Slack
// waits for the answer (Slack gives an app three seconds, and a trigger_id lives as long).
const (
	maxSlackBody     = 1 << 20
	slackReplayKeep  = 10 * time.Minute
	slackCallTimeout = 2500 * time.Millisecond
	sourceSlack      = "slack"
)

// slackChannels are the notification config's slack channels, in config order.
func (s *Server) slackChannels() []*notify.Slack {
	if s.opts.Notify == nil || s.opts.Notify.Config == nil {
		return nil
	}
	var out []*notify.Slack
	for _, name := range s.opts.Notify.Config.Names {
		if sl, ok := s.opts.Notify.Config.Channels[name].(*notify.Slack); ok {
			out = append(out, sl)
		}
	}
	return out
}

// mountSlack binds each slack channel to the store and the gate state, and serves
// SlackInteractionsPath when there is one (not on a read-only store).
func (s *Server) mountSlack() {
	chs := s.slackChannels()
	if len(chs) == 0 || s.st.ReadOnly() {
		return
	}
	for _, ch := range chs {
		ch.Bind(s.st, s.slackGate)
	}
	s.mux.HandleFunc("POST "+SlackInteractionsPath, s.slackInteractions)
}

// slackGate is gate approvalID's current state as its Slack message shows it: each vote
// as "Name (identity)", the tally in distinct people, who closed it, its page.
func (s *Server) slackGate(ctx context.Context, approvalID string) (notify.SlackGate, error) {
	a, err := s.st.GetApproval(ctx, approvalID)
	if err != nil {
		return notify.SlackGate{}, err
	}
	g := notify.SlackGate{ApprovalID: a.ApprovalID, Node: a.NodeID, Prompt: a.Prompt, Status: string(a.Status),
		ApprovalsRequired: max(a.ApprovalsRequired, 1), Approvals: len(a.ApprovedPeople()), Deadline: a.Deadline,
		Channel: a.DecidedBySource, Reason: a.Reason, RedoFrom: a.RedoFrom, URL: consolelink.ApprovalURL(s.opts.PublicURL, a.ApprovalID)}
	var approvers []string
	for _, v := range a.Votes {
		who := s.voteLabel(v.Approver, v.Person)
		g.Votes = append(g.Votes, notify.SlackVote{Who: who, Verdict: string(v.Verdict), Channel: v.Source, Reason: v.Reason, At: v.At})
		if v.Verdict == store.ApprovalApproved && !slices.Contains(approvers, who) {
			approvers = append(approvers, who)
		}
	}
	if a.Status != store.ApprovalPending {
		g.DecidedAt = a.DecidedAt
		switch {
		case a.Status == store.ApprovalApproved && len(approvers) > 0:
			g.DecidedBy = strings.Join(approvers, ", ")
		case len(a.Votes) > 0 && a.Votes[len(a.Votes)-1].Verdict == store.ApprovalRejected:
			g.DecidedBy = g.Votes[len(g.Votes)-1].Who
		default:
			g.DecidedBy = a.Approver
		}
	}
	return g, nil
}

// voteLabel is how a vote's voter is shown: "Alice Example (slack:T1/U1)" when the identity
// has a person with a name, else the identity.
func (s *Server) voteLabel(identity, person string) string {
	if name := s.personLabel(person); name != "" {
		return name + " (" + identity + ")"
	}
	return identity
}

// slackInteractions is SlackInteractionsPath: a request signed by Slack (X-Slack-Signature,
// v0 HMAC-SHA256 over "v0:<timestamp>:<body>" with a slack channel's signing secret,
// X-Slack-Request-Timestamp within five minutes; slackapi.Verify compares in
// constant time) is acted on once: a replay of the same signed request, on any replica,
// answers 200 and changes nothing. A request no configured secret verifies answers 401,
// changes nothing, and is logged in one line without the body or any secret.
func (s *Server) slackInteractions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSlackBody+1))
	if err != nil {
		http.Error(w, "reading the request failed", http.StatusBadRequest)
		return
	}
	if len(body) > maxSlackBody {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	ch, why := s.verifySlack(r.Header, body)
	if ch == nil {
		s.log.WarnContext(ctx, "slack interaction refused", "reason", why, "remote", r.RemoteAddr)
		http.Error(w, "the request's Slack signature does not verify", http.StatusUnauthorized)
		return
	}
	sum := sha256.Sum256([]byte("v0:" + r.Header.Get("X-Slack-Request-Timestamp") + ":" + string(body)))
	first, err := s.st.RecordSlackInteraction(ctx, hex.EncodeToString(sum[:]), time.Now(), slackReplayKeep)
	if err != nil {
		s.log.ErrorContext(ctx, "recording a slack interaction failed", "err", err)
		http.Error(w, "the control plane could not record the request; try again", http.StatusServiceUnavailable)
		return
	}
	if !first {
		s.log.WarnContext(ctx, "slack interaction replay ignored", "remote", r.RemoteAddr)
		w.WriteHeader(http.StatusOK)
		return
	}
	form, err := url.ParseQuery(string(body))
	var cb slackapi.InteractionCallback
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &cb)
	}
	if err != nil {
		http.Error(w, "want a form with a JSON payload, as Slack sends interactions", http.StatusBadRequest)
		return
	}
	switch cb.Type {
	case slackapi.InteractionBlockActions:
		s.slackAction(ctx, ch, cb)
	case slackapi.InteractionViewSubmission:
		if resp := s.slackSubmission(ctx, ch, cb); resp != nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(resp)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// verifySlack returns the slack channel whose signing secret verifies the request, or nil
// and why not (for the log: never the secret, the signature or the body).
func (s *Server) verifySlack(h http.Header, body []byte) (*notify.Slack, string) {
	why := "no slack channel is configured"
	for _, ch := range s.slackChannels() {
		err := slackapi.Verify(h, body, ch.SigningSecret(), time.Now())
		switch {
		case err == nil:
			return ch, ""
		case errors.Is(err, slackapi.ErrMissingHeaders):
			return nil, "X-Slack-Signature or X-Slack-Request-Timestamp is missing"
		case errors.Is(err, slackapi.ErrExpiredTimestamp):
			return nil, "X-Slack-Request-Timestamp is more than five minutes from now"
		default:
			why = "the signature does not match a configured signing secret"
		}
	}
	return nil, why
}

// slackIdentity is the Slack user of an interaction as rbook names it: "slack:<team>/<user>".
func slackIdentity(cb slackapi.InteractionCallback) string {
	team := cb.Team.ID
	if team == "" {
		team = cb.User.TeamID
	}
	return "slack:" + team + "/" + cb.User.ID
}

// slackVoterContext is ctx with the Slack user as the verified caller, so deciding goes
// through Approve's own path (decide) and eligibility answers for them.
func slackVoterContext(ctx context.Context, identity string) context.Context {
	return context.WithValue(ctx, callerKey{}, Caller{Identity: identity, Role: RoleApprover})
}

// slackLinked reports whether the Slack user has a person in the directory; when not, it
// tells them how to get linked (people.NotLinkedMessage), to them only, and counts nothing.
func (s *Server) slackLinked(ctx context.Context, ch *notify.Slack, channel, user, identity string) bool {
	if _, ok := s.PersonOf(identity); ok {
		return true
	}
	s.log.InfoContext(ctx, "slack vote refused: the user is linked to no person", "identity", identity)
	s.slackEphemeral(ctx, ch, channel, user, people.NotLinkedMessage(identity))
	return false
}

// slackEphemeral tells one Slack user something in channel (chat.postEphemeral); a failure
// is logged.
func (s *Server) slackEphemeral(ctx context.Context, ch *notify.Slack, channel, user, text string) {
	if channel == "" {
		channel = ch.SlackChannel()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), slackCallTimeout)
	defer cancel()
	if err := ch.API().PostEphemeral(cctx, channel, user, text); err != nil {
		s.log.WarnContext(ctx, "slack ephemeral message failed", "channel", ch.Name(), "err", err.Error())
	}
}

// slackAction handles a button of a gate message: Approve decides at once, or opens the
// approver-input form when the gate declares inputs; Reject opens the reason form. A refusal
// is told to the person who pressed it only.
func (s *Server) slackAction(ctx context.Context, ch *notify.Slack, cb slackapi.InteractionCallback) {
	if len(cb.Actions) == 0 {
		return
	}
	act := cb.Actions[0]
	if act.ActionID != notify.SlackActionApprove && act.ActionID != notify.SlackActionReject {
		return // the link button, or another app's action
	}
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	identity := slackIdentity(cb)
	if !s.slackLinked(ctx, ch, channel, cb.User.ID, identity) {
		return
	}
	ctx = slackVoterContext(ctx, identity)
	a, err := s.st.GetApproval(ctx, act.Value)
	if err != nil {
		s.slackEphemeral(ctx, ch, channel, cb.User.ID, "This gate is not on this control plane (approval "+truncate(act.Value, 140)+"); nothing was decided.")
		return
	}
	if a.Status != store.ApprovalPending {
		s.slackEphemeral(ctx, ch, channel, cb.User.ID, closedSentence(a))
		return
	}
	meta := notify.SlackModalMeta{ApprovalID: a.ApprovalID, Channel: channel}
	if act.ActionID == notify.SlackActionReject {
		s.slackOpen(ctx, ch, cb, notify.SlackRejectModal(meta, a.NodeID, s.approvalToProto(a).GetRewindTargets()))
		return
	}
	if e := s.eligibility(ctx, a, nil); e != nil && !e.GetMayDecide() {
		s.slackEphemeral(ctx, ch, channel, cb.User.ID, e.GetReason())
		return
	}
	if len(a.Inputs) > 0 {
		s.slackOpen(ctx, ch, cb, notify.SlackApproveModal(meta, a.NodeID, a.Inputs))
		return
	}
	s.slackDecide(ctx, ch, channel, cb.User.ID, vote{approvalID: a.ApprovalID, verdict: store.ApprovalApproved, source: sourceSlack})
}

// slackOpen opens a modal for the user who pressed a button (views.open with its trigger_id).
func (s *Server) slackOpen(ctx context.Context, ch *notify.Slack, cb slackapi.InteractionCallback, view slackapi.ModalView) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), slackCallTimeout)
	defer cancel()
	if err := ch.API().OpenView(cctx, cb.TriggerID, view); err != nil {
		s.log.WarnContext(ctx, "slack views.open failed", "channel", ch.Name(), "err", err.Error())
		channel := cb.Channel.ID
		if channel == "" {
			channel = cb.Container.ChannelID
		}
		s.slackEphemeral(ctx, ch, channel, cb.User.ID, "Slack did not open the form ("+err.Error()+"); nothing was decided. Press the button again.")
	}
}

// slackSubmission handles a submitted modal: the approve form's values are checked against
// the gate's declaration (gateinputs.Validate) and an invalid one is answered with
// response_action "errors" naming its field; the reject form needs a reason, and its "Send
// back to" choice is the rejection's redo_from (docs/push-back.md). Then the vote goes
// through decide. nil means "close the modal".
func (s *Server) slackSubmission(ctx context.Context, ch *notify.Slack, cb slackapi.InteractionCallback) *slackapi.ViewSubmissionResponse {
	var meta notify.SlackModalMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil || meta.ApprovalID == "" {
		return nil // not one of rbook's modals
	}
	identity := slackIdentity(cb)
	if !s.slackLinked(ctx, ch, meta.Channel, cb.User.ID, identity) {
		return nil
	}
	ctx = slackVoterContext(ctx, identity)
	var values map[string]map[string]slackapi.BlockAction
	if cb.View.State != nil {
		values = cb.View.State.Values
	}
	value := func(block string) string {
		a := values[block][notify.SlackValueAction]
		if a.SelectedOption.Value != "" {
			return a.SelectedOption.Value
		}
		return strings.TrimSpace(a.Value)
	}
	switch cb.View.CallbackID {
	case notify.SlackModalApprove:
		a, err := s.st.GetApproval(ctx, meta.ApprovalID)
		if err != nil {
			s.slackEphemeral(ctx, ch, meta.Channel, cb.User.ID, "This gate is not on this control plane (approval "+truncate(meta.ApprovalID, 140)+"); nothing was decided.")
			return nil
		}
		inputs := map[string]string{}
		for _, f := range a.Inputs {
			if v := value(notify.SlackInputBlockPrefix + f.Name); v != "" {
				inputs[f.Name] = v
			}
		}
		if _, e := gateinputs.Validate(a.Inputs, inputs); e != nil {
			return slackapi.NewErrorsResponse(map[string]string{notify.SlackInputBlockPrefix + e.Field: e.Msg})
		}
		s.slackDecide(ctx, ch, meta.Channel, cb.User.ID, vote{approvalID: meta.ApprovalID, verdict: store.ApprovalApproved,
			source: sourceSlack, inputs: inputs})
	case notify.SlackModalReject:
		reason := value(notify.SlackReasonBlock)
		if reason == "" {
			return slackapi.NewErrorsResponse(map[string]string{notify.SlackReasonBlock: "Give a reason: the run's starter reads it."})
		}
		if err := printableText("reason", reason); err != nil {
			return slackapi.NewErrorsResponse(map[string]string{notify.SlackReasonBlock: "Give one line of text, without line breaks."})
		}
		s.slackDecide(ctx, ch, meta.Channel, cb.User.ID, vote{approvalID: meta.ApprovalID, verdict: store.ApprovalRejected,
			source: sourceSlack, reason: reason, redoFrom: value(notify.SlackRedoBlock)})
	}
	return nil
}

// slackDecide casts v through decide, Approve's and Reject's own path (the gate policy,
// four-eyes, M-of-N in people, the compare-and-set), as the Slack user of ctx. A refusal is
// told to that user only; a counted vote changes the gate, whose events update the message
// for everyone.
func (s *Server) slackDecide(ctx context.Context, ch *notify.Slack, channel, user string, v vote) {
	a, err := s.decide(ctx, v)
	if err != nil {
		msg := err.Error()
		var ce *connect.Error
		if errors.As(err, &ce) {
			msg = ce.Message()
			if code := errorCode(err); code != "" {
				msg = strings.TrimPrefix(msg, code+": ")
			}
		}
		s.log.InfoContext(ctx, "slack vote refused", "approval_id", v.approvalID, "code", errorCode(err))
		s.slackEphemeral(ctx, ch, channel, user, "Not counted: "+msg)
		return
	}
	s.log.InfoContext(ctx, "slack vote counted", "approval_id", a.ApprovalID, "status", string(a.Status))
	if s.notifier != nil {
		s.notifier.poke()
	}
}
