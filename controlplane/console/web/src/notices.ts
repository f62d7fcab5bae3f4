// notices.ts: a gate's escalation and the delivery status of the notifications about it, on
// the gate page (docs/notifications.md, "On the gate"). The control plane sends channel
// names and kinds only, never a receiver's URL or address.
import { h } from "./dom.js";
import { timeEl } from "./format.js";
import type { Approval, GateNotification } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";

/** escalatedText is "Escalated (step N)" when the gate escalated, else "". */
export function escalatedText(a: Approval): string {
  return a.escalations > 0 ? `Escalated (step ${a.escalations})` : "";
}

/** noticeRow is one notification as the page lists it: channel, event, status, attempts. */
export function noticeRow(n: GateNotification): string[] {
  const channel = n.channelKind ? `${n.channel} (${n.channelKind})` : n.channel;
  const attempts = n.attempts === 1 ? "1 failed attempt" : `${n.attempts} failed attempts`;
  return [channel, n.type, n.status, n.attempts ? attempts : "-"];
}

/** noticesBlock is the escalation line and the table of notifications; null when there is
 * nothing to show (no notification configuration, or none sent yet). */
export function noticesBlock(a: Approval): HTMLElement | null {
  const esc = escalatedText(a);
  if (!esc && a.notifications.length === 0) return null;
  return h("div", { id: "notices" },
    esc ? h("p", { id: "escalated", class: "escalated" }, `${esc} at `, timeEl(a.escalatedAt)) : null,
    a.notifications.length
      ? h("table", { id: "notifications", class: "compact" },
        h("thead", null, h("tr", null, ["Channel", "Event", "Status", "Attempts"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", null, a.notifications.map((n) => h("tr", { class: `notice-${n.status}`, title: n.lastError || undefined },
          noticeRow(n).map((c) => h("td", null, c))))))
      : null,
  );
}

/** noticesKey is what the page shows of a's notices, to tell whether a newer read changed it. */
export function noticesKey(a: Approval): string {
  return [a.escalations, ...a.notifications.map((n) => `${n.eventId}/${n.channel}/${n.status}/${n.attempts}`)].join("|");
}
