package server

import (
	"context"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// fillNotices sets a gate's escalation and notification delivery status on p
// (Approval.escalations, escalated_at, notifications; docs/notifications.md, "On the gate")
// from the notification outbox, when this control plane sends notifications. The entries
// name channels by their configured names and kinds and carry no receiver URL, address or
// secret: an error text is passed through publicError. A read that fails leaves them out,
// logged: the gate itself is still shown.
func (s *Server) fillNotices(ctx context.Context, p *rbookv1.Approval) {
	if s.notifier == nil {
		return
	}
	g, err := s.st.GateNotices(ctx, p.GetApprovalId())
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading a gate's notifications failed; showing the gate without them", "approval_id", p.GetApprovalId(), "err", err)
		}
		return
	}
	p.Escalations = int32(g.Escalations)
	if !g.EscalatedAt.IsZero() {
		p.EscalatedAt = timestamppb.New(g.EscalatedAt)
	}
	for _, d := range g.Deliveries {
		n := &rbookv1.GateNotification{EventId: d.Event.ID, Type: d.Event.Kind, Channel: d.Channel, Attempts: int32(d.Attempts),
			LastError: publicError(d.LastError)}
		if ch, ok := s.notifier.cfg.Channels[d.Channel]; ok {
			n.ChannelKind = ch.Kind()
		}
		switch d.State() {
		case "delivered":
			n.Status, n.DeliveredAt = "delivered", timestamppb.New(d.DeliveredAt)
		case "given_up":
			n.Status = "failed"
			if n.LastError == "" {
				n.LastError = publicError(d.GivenUpReason)
			}
		default:
			n.Status = "pending"
		}
		p.Notifications = append(p.Notifications, n)
	}
}

// maxPublicError bounds an error text a gate's reader sees (bytes).
const maxPublicError = 300

// Patterns publicError hides: URLs (a Teams workflow URL carries its signature), email
// addresses, and host:port or IP addresses of receivers.
var (
	urlRE      = lazyregexp.New(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)
	emailRE    = lazyregexp.New(`[^\s<>"'(),;:]+@[^\s<>"'(),;:]+`)
	hostPortRE = lazyregexp.New(`\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?|\b[A-Za-z0-9][A-Za-z0-9.-]*:[0-9]{1,5}\b|\b[0-9]{1,3}(\.[0-9]{1,3}){3}\b`)
)

// publicError is a delivery error as a gate's reader may see it: URLs, email addresses and
// receiver addresses replaced by "<url>" and "<address>", cut to maxPublicError bytes.
func publicError(s string) string {
	s = urlRE.ReplaceAllString(s, "<url>")
	s = emailRE.ReplaceAllString(s, "<address>")
	s = hostPortRE.ReplaceAllString(s, "<address>")
	if len(s) > maxPublicError {
		s = strings.ToValidUTF8(s[:maxPublicError], "") + "…"
	}
	return s
}
