package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/consolelink"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// Back-off and give-up bounds of the notification delivery loop (docs/notifications.md,
// "Delivery guarantees"): the n-th consecutive failure of a delivery waits
// DefaultNotifyRetryBase·2^(n-1), at most MaxNotifyRetry; a delivery that failed
// DefaultNotifyMaxAttempts times in a row (about 40 minutes of trying), or
// MaxNotifyRefusedAttempts times with a refusal that retrying will not change
// (notify.IsPermanent: a 4xx other than 408 and 429), is given up: logged at error level,
// recorded with its reason (store.ListNotificationDeliveries shows it), never tried again.
const (
	DefaultNotifyRetryBase   = time.Second
	MaxNotifyRetry           = 5 * time.Minute
	DefaultNotifyMaxAttempts = 15
	MaxNotifyRefusedAttempts = 3
)

// NotificationClaimLease is a replica's claim on one delivery attempt
// (store.ClaimNotificationDelivery): longer than one attempt (notify.RequestTimeout) plus
// slack, so no other replica sends the same event to the same channel meanwhile; a replica
// that dies holding it leaves the delivery to the others once it has passed.
const NotificationClaimLease = notify.RequestTimeout + 30*time.Second

// notifyBatch is how many events or deliveries one pass reads at a time.
const notifyBatch = 50

// NotifyOptions configures notifications (rbook serve --notify-config).
type NotifyOptions struct {
	// Config is the parsed config: channels and routes; required.
	Config *notify.Config
	// RetryBase is the first back-off (doubling up to MaxNotifyRetry); zero means
	// DefaultNotifyRetryBase.
	RetryBase time.Duration
	// MaxAttempts is how many consecutive failures give a delivery up; zero means
	// DefaultNotifyMaxAttempts.
	MaxAttempts int
	// RequesterEmail maps a run's starter identity to an email address for email channels
	// with to_requester ("" when it has none); nil means Server.RequesterEmail.
	RequesterEmail func(identity string) string
}

// RequesterEmailOf is the email address an identity is, "" when it is not one: "alice@x.org"
// or "email:alice@x.org" (an OIDC or sign-in email identity).
func RequesterEmailOf(identity string) string {
	a, err := mail.ParseAddress(strings.TrimPrefix(identity, "email:"))
	if err != nil || a.Name != "" || !strings.Contains(a.Address, "@") {
		return ""
	}
	return a.Address
}

// notifier routes the notification outbox's events to channels and delivers them.
type notifier struct {
	outboxLoop
	s    *Server
	cfg  *notify.Config
	log  *slog.Logger
	base time.Duration
	max  int
	// requester maps a run's starter to an email address (NotifyOptions.RequesterEmail).
	requester func(identity string) string
	// sweep is the retention sweep's state (notifysweep.go).
	sweep sweeper
}

func newNotifier(s *Server, o *NotifyOptions) *notifier {
	n := &notifier{outboxLoop: newOutboxLoop(), s: s, cfg: o.Config, log: s.log, base: o.RetryBase, max: o.MaxAttempts}
	if n.base <= 0 {
		n.base = DefaultNotifyRetryBase
	}
	if n.max <= 0 {
		n.max = DefaultNotifyMaxAttempts
	}
	n.requester = o.RequesterEmail
	if n.requester == nil {
		n.requester = s.RequesterEmail
	}
	return n
}

// RequesterEmail is the email address the decision of a gate is mailed to for a run started
// by identity: the "email:" identity of its person in the people directory (docs/people.md),
// so a run started with an auth-file token or a GitHub job still reaches its person's inbox;
// else the identity itself when it is an address (RequesterEmailOf); else "".
func (s *Server) RequesterEmail(identity string) string {
	if p, ok := s.PersonOf(identity); ok {
		if addr := p.Email(); addr != "" {
			return addr
		}
	}
	return RequesterEmailOf(identity)
}

// requesterEmail is the address a run's requester is mailed at (docs/notifications.md,
// "Channels"): its starter's (NotifyOptions.RequesterEmail); else, for a run a GitHub Actions
// job started, whose started_by "oidc:<repository>@<ref>" is no person, the workflow actor's
// as the identity github:<actor> (its person's email: identity); else "".
func (n *notifier) requesterEmail(d store.EventData) string {
	if d.StartedBy != "" {
		if addr := n.requester(d.StartedBy); addr != "" {
			return addr
		}
	}
	if d.GitHubActor != "" {
		return n.requester("github:" + d.GitHubActor)
	}
	return ""
}

// start gives up the deliveries to channels the config no longer has (logged), then runs
// the loop until ctx ends and closes done.
func (n *notifier) start(ctx context.Context, done chan<- struct{}) {
	reason := "its channel is no longer in the notification config " + n.cfg.File
	if k, err := n.s.st.GiveUpOtherChannels(ctx, n.cfg.Names, reason); err != nil {
		n.log.Error("giving up notifications of removed channels failed", "err", err)
	} else if k > 0 {
		n.log.Error("notification deliveries given up: their channel was removed from the config", "deliveries", k, "config", n.cfg.File)
	}
	n.run(ctx, done, n.pass)
}

// pass routes every unrouted event, delivers every due delivery and returns how long until
// the next retry (ok=false: none waits).
func (n *notifier) pass(ctx context.Context) (time.Duration, bool) {
	logErr := func(what string, err error) (time.Duration, bool) {
		if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
			n.log.Error(what, "err", err)
		}
		return deadlineRetry, true
	}
	for ctx.Err() == nil {
		evs, err := n.s.st.UnroutedNotificationEvents(ctx, notifyBatch)
		if err != nil {
			return logErr("reading the notification outbox failed", err)
		}
		for _, e := range evs {
			if err := n.s.st.RouteNotificationEvent(ctx, e.ID, n.cfg.ChannelsFor(e.Kind, e.Data)); err != nil {
				return logErr("routing a notification failed", err)
			}
		}
		if len(evs) < notifyBatch {
			break
		}
	}
	nextEscalation, escalating, err := n.escalate(ctx)
	if err != nil {
		return logErr("escalating a pending gate failed", err)
	}
	if err := n.deliverAll(ctx); err != nil {
		return logErr("reading the notification outbox failed", err)
	}
	next, ok, err := n.s.st.NextNotificationAttempt(ctx)
	if err != nil {
		return logErr("reading the notification outbox failed", err)
	}
	if escalating && (!ok || nextEscalation.Before(next)) {
		next, ok = nextEscalation, true
	}
	if at := n.sweepOld(ctx); !ok || at.Before(next) {
		next, ok = at, true
	}
	if !ok {
		return 0, false
	}
	return max(time.Until(next), 0), true
}

// escalate fires every escalation step that is due for a pending gate (the steps of the
// route its gate.opened event took, timed from that event) and returns when the next step
// is due (ok=false: none is waiting). Each step is one gate.escalated event, written once
// (store.RecordEscalation, which reports the gate's tally as it stands then) and delivered
// like any other.
func (n *notifier) escalate(ctx context.Context) (next time.Time, ok bool, err error) {
	if !n.cfg.HasEscalation() {
		return time.Time{}, false, nil
	}
	gates, err := n.s.st.PendingGateOpenings(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	now := time.Now()
	for _, p := range gates {
		e := p.Opened
		r := n.cfg.RouteFor(e.Kind, e.Data)
		if r == nil || e.Data.Gate == nil {
			continue
		}
		for i := p.Escalated; i < len(r.Escalate); i++ {
			step := r.Escalate[i]
			at := e.CreatedAt.Add(step.After)
			if at.After(now) {
				if !ok || at.Before(next) {
					next, ok = at, true
				}
				break
			}
			d, g := e.Data, *e.Data.Gate
			g.Escalation = &store.EscalationData{Step: i + 1, After: step.After.String()}
			d.Gate = &g
			ev := store.NotificationEvent{ID: fmt.Sprintf("%s:%s:%d", store.EventGateEscalated, e.ApprovalID, i+1),
				Kind: store.EventGateEscalated, RunID: e.RunID, ApprovalID: e.ApprovalID, Data: d}
			wrote, err := n.s.st.RecordEscalation(ctx, ev, step.Channels)
			if err != nil {
				return time.Time{}, false, err
			}
			if wrote {
				n.log.Info("gate escalated", "approval_id", e.ApprovalID, "run_id", e.RunID, "step", i+1,
					"after", step.After.String(), "channels", strings.Join(step.Channels, ","))
			}
		}
	}
	return next, ok, nil
}

// deliverAll delivers what is due, each channel's deliveries in order on its own
// goroutine, so a slow or unreachable receiver does not hold up the other channels. A
// channel's first failure ends its turn in this pass (its other deliveries wait for the
// next pass, which the failed one's retry time brings), so a receiver that is down costs
// one attempt per back-off, not one per event.
func (n *notifier) deliverAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(n.cfg.Names))
	for i, name := range n.cfg.Names {
		wg.Go(func() {
			for ctx.Err() == nil {
				due, err := n.s.st.DueNotificationDeliveries(ctx, time.Now(), name, notifyBatch)
				if err != nil {
					errs[i] = err
					return
				}
				for _, d := range due {
					if !n.deliver(ctx, d) {
						return
					}
				}
				if len(due) < notifyBatch {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// deliver claims delivery d, sends it once through its channel and records the outcome: a
// success with the provider's message id, a failure with the next attempt's time, or, at
// the bounds above, the give-up with its reason. It reports false when the attempt failed.
func (n *notifier) deliver(ctx context.Context, d store.NotificationDelivery) bool {
	now := time.Now()
	ctx, fields := telemetry.WithFields(ctx) // each line below names the event's run and gate
	fields.Set(d.Event.RunID, "", d.Event.ApprovalID)
	attempts, ok, err := n.s.st.ClaimNotificationDelivery(ctx, d.Event.ID, d.Channel, now, now.Add(NotificationClaimLease))
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
			n.log.ErrorContext(ctx, "claiming a notification for delivery failed", "event", d.Event.ID, "channel", d.Channel, "err", err)
		}
		return false
	}
	if !ok {
		return true // another replica has it, or it is done
	}
	ch := n.cfg.Channels[d.Channel]
	m := notify.Message{ID: d.Event.ID, Kind: d.Event.Kind, At: d.Event.CreatedAt, Data: d.Event.Data}
	if ch.Kind() == "email" {
		m.RequesterEmail = n.requesterEmail(d.Event.Data)
		n.gateRecipients(ctx, &m)
	}
	if g := m.Data.Gate; g != nil {
		g.ApprovalURL = consolelink.ApprovalURL(n.s.opts.PublicURL, g.ApprovalID)
		if m.Kind != store.EventGateOpened {
			if m.GateMessageID, err = n.s.st.GateMessageID(ctx, g.ApprovalID, d.Channel); err != nil {
				n.log.WarnContext(ctx, "reading the gate's earlier message failed; sending without it", "event", d.Event.ID, "channel", d.Channel, "err", err)
			}
		}
	}
	sendCtx, cancel := context.WithTimeout(ctx, notify.RequestTimeout)
	msgID, err := ch.Send(sendCtx, m)
	cancel()
	if err == nil {
		n.s.metrics.NotificationDelivery(ch.Kind(), "delivered")
		if werr := n.s.st.NotificationDelivered(ctx, d.Event.ID, d.Channel, msgID, time.Now()); werr != nil {
			// The receiver has it; should this write fail the event is sent again later,
			// with the same id, which the receiver de-duplicates.
			n.log.ErrorContext(ctx, "recording a delivered notification failed", "event", d.Event.ID, "channel", d.Channel, "err", werr)
			return true
		}
		n.log.InfoContext(ctx, "notification delivered", "event", d.Event.ID, "channel", d.Channel, "kind", ch.Kind(), "attempt", attempts+1)
		return true
	}
	if ctx.Err() != nil {
		// Shutting down: the claim's lease hands the delivery to the next start or replica.
		return false
	}
	failures := attempts + 1
	limit, why := n.max, "the receiver is unreachable or failing"
	if notify.IsPermanent(err) {
		limit, why = min(limit, MaxNotifyRefusedAttempts), "the receiver refused it"
	}
	if failures >= limit {
		n.s.metrics.NotificationDelivery(ch.Kind(), "given_up")
		n.giveUp(ctx, d, failures, fmt.Sprintf("gave up after %d failed attempts (%s): %s", failures, why, err.Error()))
		return false
	}
	n.s.metrics.NotificationDelivery(ch.Kind(), "failed")
	delay := retryDelay(n.base, failures, MaxNotifyRetry)
	if werr := n.s.st.NotificationAttemptFailed(ctx, d.Event.ID, d.Channel, err.Error(), time.Now().Add(delay)); werr != nil {
		n.log.ErrorContext(ctx, "recording a failed notification delivery failed", "event", d.Event.ID, "channel", d.Channel, "err", werr)
		return false
	}
	n.log.WarnContext(ctx, "notification delivery failed; retrying", "event", d.Event.ID, "channel", d.Channel, "attempt", failures,
		"retry_in", delay.String(), "err", err.Error())
	return false
}

func (n *notifier) giveUp(ctx context.Context, d store.NotificationDelivery, attempts int, reason string) {
	n.log.Error("notification delivery given up", "event", d.Event.ID, "channel", d.Channel, "run_id", d.Event.RunID,
		"approval_id", d.Event.ApprovalID, "attempts", attempts, "reason", reason)
	if err := n.s.st.GiveUpNotification(ctx, d.Event.ID, d.Channel, reason, time.Now()); err != nil {
		n.log.Error("recording a given-up notification failed", "event", d.Event.ID, "channel", d.Channel, "err", err)
	}
}
