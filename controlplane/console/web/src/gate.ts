// gate.ts: the gate page (/approvals/<id>): the prompt, the run's context, what happens if the
// person approves (the plan after the gate and its digest), the evidence so far, who voted and
// who may, and Approve / Reject (docs/console.md, "The gate"). The server decides whether a
// click counts; the page only shows the answer.
import { h, replace, dl } from "./dom.js";
import { announce, ready, setTitle, showError, sleep } from "./app.js";
import type { Page } from "./app.js";
import { approvals, errorCode, errorText, isAborted, isApprover, runs, whoAmI } from "./api.js";
import type { Who } from "./api.js";
import { fullRun } from "./data.js";
import type { FullRun } from "./data.js";
import { approvalCount, approvalStatus, isFinal, kindWord, ms, runStatus, runStatusClass, tally, timeEl, workflowRunOf, workflowRunURL, duration } from "./format.js";
import { decisionBlock, evidenceTable, planStepItem, stepInfos, votesList } from "./parts.js";
import { mayDecide } from "./waiting.js";
import { inputsForm, inputValuesList } from "./inputs.js";
import { noticesBlock, noticesKey } from "./notices.js";
import { ApprovalStatus } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import type { Approval } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import { RunKind } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import type { PlanStep, Run } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";

/** stepsAfter returns the plan steps that run after the gate: later steps of a runbook's chain,
 * or the nodes that depend on the gate node (directly or not) in a playbook. */
export function stepsAfter(steps: PlanStep[], gateIndex: number, kind: RunKind): PlanStep[] {
  if (kind !== RunKind.PLAYBOOK) return steps.filter((s) => s.index > gateIndex);
  const after = new Set<number>([gateIndex]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const s of steps) {
      if (!after.has(s.index) && s.depends.some((d) => after.has(d))) {
        after.add(s.index);
        grew = true;
      }
    }
  }
  after.delete(gateIndex);
  return steps.filter((s) => after.has(s.index));
}

function runContext(run: Run, a: Approval): HTMLElement {
  const j = run.startedByJob;
  const w = run.reportedWorkflowRun ?? a.github;
  const wf = workflowRunOf(run, a);
  const wfURL = workflowRunURL(run, a);
  return dl("run-context", [
    [kindWord(run), h("a", { href: `/runs/${encodeURIComponent(run.runId)}` }, run.name)],
    ["Run", h("code", null, run.runId)],
    ["Content hash", h("code", { class: "hash" }, run.contentHash)],
    ["Repository", j?.repository || w?.repository || ""],
    ["Workflow run", wf ? (wfURL ? h("a", { href: wfURL, rel: "noreferrer" }, wf) : wf) : ""],
    ["Workflow", j?.workflowRef || ""],
    ["Ref", j?.ref || ""],
    ["Commit", j?.sha ? h("code", null, j.sha) : w?.sha ? h("code", null, w.sha) : ""],
    ["Actor (verified)", j?.actor || ""],
    ["Actor (reported)", !j?.actor && w?.actor ? w.actor : ""],
    ["Environment", a.github?.environment || j?.environment || ""],
    ["Started by", run.startedBy],
    ["Started", timeEl(run.startedAt)],
    ["If rejected or timed out", a.onFail ? `on_fail: ${a.onFail}` : ""],
  ]);
}

function whoMay(a: Approval, w: Who): HTMLElement {
  const need = a.approvalsRequired || 1;
  const allowed = a.allowedApprovers.length ? `Allowed approvers: ${a.allowedApprovers.join(", ")}.` : "Anyone with the approver role may decide.";
  const four = w.known && !w.authEnabled
    ? "Without sign-in this control plane cannot tell people apart, so four-eyes is not checked."
    : a.starterMayApprove ? "The person who started the run may approve too." : "The person who started the run may not approve it (four-eyes).";
  const left = Math.max(0, need - approvalCount(a));
  const more = a.status === ApprovalStatus.PENDING ? ` ${left} more approval${left === 1 ? "" : "s"} needed.` : "";
  return h("p", { id: "who-may" }, `${need} distinct approval${need === 1 ? "" : "s"} open${need === 1 ? "s" : ""} this gate.${more} ${allowed} ${four} One rejection rejects it.`);
}

/** noticesRefreshMs is how often a waiting gate's page re-reads its escalation and
 * notification status. */
const noticesRefreshMs = 15000;

/** gatePage renders /approvals/<id>. */
export async function gatePage(p: Page): Promise<void> {
  const id = p.params[0];
  setTitle("Gate");
  const [w, got] = await Promise.all([whoAmI(), approvals.getApproval({ approvalId: id }, { signal: p.signal })]);
  let a = got.approval!;
  let fr: FullRun = await fullRun(a.runId, p.signal);
  setTitle(`Gate ${a.stepName}`);

  const statusEl = h("p", { id: "gate-status", class: "gate-status" }, approvalStatus(a));
  const runStatusEl = h("span", { id: "run-status", class: runStatusClass(fr.run.status) }, runStatus(fr.run.status));
  const tallyEl = h("p", { id: "tally", class: "tally" }, tally(a));
  const votesBox = h("div", null, votesList(a));
  const whoMayBox = h("div", null, whoMay(a, w));
  const decisionBox = h("div", null, decisionBlock(a, "decision"), inputValuesList(a));
  const noticesBox = h("div", null, noticesBlock(a));
  const decideBox = h("div");
  const outcome = h("p", { id: "outcome", role: "status" });
  const evidenceBox = h("div", null, evidenceTable("evidence-table", stepInfos(fr.transitions, fr.plan?.steps)));

  const left = h("span", { id: "deadline-left" });
  const deadlineEl = ms(a.deadline) ? h("p", { id: "deadline" }, "Deadline: ", timeEl(a.deadline), " (", left, ")") : null;
  const tickDeadline = (): void => {
    const d = ms(a.deadline) - Date.now();
    left.textContent = a.status !== ApprovalStatus.PENDING ? "closed" : d > 0 ? `${duration(d)} left` : "passed";
  };
  tickDeadline();
  const ticker = setInterval(tickDeadline, 1000);
  p.signal.addEventListener("abort", () => clearInterval(ticker), { once: true });
  const plan = fr.plan;
  const names = new Map((plan?.steps ?? []).map((s) => [s.index, s.name] as [number, string]));
  const after = plan ? stepsAfter(plan.steps, a.stepIndex, fr.run.kind) : [];
  const planSection = h("section", { id: "plan", "aria-labelledby": "plan-h" },
    h("h2", { id: "plan-h" }, a.status === ApprovalStatus.PENDING ? "What happens if I approve" : "What runs after this gate"),
    h("p", null, "The decision is bound to the plan digest ", h("code", { id: "plan-digest", class: "hash" }, a.planDigest || fr.run.contentHash), `: if the ${kindWord(fr.run).toLowerCase()} changes, this approval no longer counts.`),
    plan
      ? after.length
        ? h("ol", { id: "plan-steps" }, after.map((s) => planStepItem(s, names)))
        : h("p", { id: "plan-steps", class: "none" }, "Nothing: this gate is the last step.")
      : h("p", { id: "plan-missing", class: "none" }, "The executor did not send its plan (an older rbook), so the steps after this gate cannot be shown."),
    plan?.truncated ? h("p", { class: "muted" }, "Some inputs were left out by the executor to keep the plan small.") : null,
  );

  replace(p.main,
    h("h1", null, "Gate ", h("span", { class: "step-name" }, a.stepName)),
    statusEl,
    h("section", { id: "prompt-section", "aria-labelledby": "prompt-h" }, h("h2", { id: "prompt-h" }, "Prompt"), h("pre", { id: "prompt", tabindex: 0 }, a.prompt || "(no prompt)")),
    planSection,
    h("section", { id: "votes", "aria-labelledby": "votes-h" }, h("h2", { id: "votes-h" }, "Who decides"), tallyEl, votesBox, whoMayBox,
      deadlineEl, noticesBox),
    h("section", { id: "decide-section", "aria-labelledby": "decide-h" }, h("h2", { id: "decide-h" }, "Decision"), decisionBox, decideBox, outcome),
    h("section", { id: "context", "aria-labelledby": "context-h" }, h("h2", { id: "context-h" }, "The run"), h("p", null, "Run status: ", runStatusEl), runContext(fr.run, a)),
    h("section", { id: "evidence", "aria-labelledby": "evidence-h" }, h("h2", { id: "evidence-h" }, "Evidence so far"), evidenceBox),
  );

  const update = (next: Approval, say?: string): void => {
    a = next;
    statusEl.textContent = approvalStatus(a);
    tallyEl.textContent = tally(a);
    votesBox.replaceChildren(votesList(a));
    whoMayBox.replaceChildren(whoMay(a, w));
    decisionBox.replaceChildren(decisionBlock(a, "decision") ?? "", inputValuesList(a) ?? "");
    noticesBox.replaceChildren(noticesBlock(a) ?? "");
    drawDecide(decideBox, a, w, outcome, update);
    tickDeadline();
    if (say) announce(say);
  };
  drawDecide(decideBox, a, w, outcome, update);
  ready(p.main);

  void watchApproval(p, id, (x) => {
    const changed = x.status !== a.status || x.votes.length !== a.votes.length;
    if (changed) update(x, `Gate ${approvalStatus(x).toLowerCase()}: ${tally(x)}.`);
    else if (noticesKey(x) !== noticesKey(a)) update(x);
  });
  // Escalations and deliveries are not changes of the gate itself, so the watch does not
  // bring them: re-read them while the gate waits.
  const noticesTimer = setInterval(() => {
    if (a.status !== ApprovalStatus.PENDING) return;
    approvals.getApproval({ approvalId: id }, { signal: p.signal }).then((r) => {
      const x = r.approval;
      if (x && x.status === a.status && x.votes.length === a.votes.length && noticesKey(x) !== noticesKey(a)) {
        update(x, x.escalations > a.escalations ? `Gate escalated (step ${x.escalations}).` : undefined);
      }
    }, () => undefined);
  }, noticesRefreshMs);
  p.signal.addEventListener("abort", () => clearInterval(noticesTimer), { once: true });
  void watchRun(p, fr, (next) => {
    fr = next;
    runStatusEl.textContent = runStatus(fr.run.status);
    runStatusEl.className = runStatusClass(fr.run.status);
    evidenceBox.replaceChildren(evidenceTable("evidence-table", stepInfos(fr.transitions, fr.plan?.steps)));
  });
}

function drawDecide(box: HTMLElement, a: Approval, w: Who, outcome: HTMLElement, update: (a: Approval, say?: string) => void): void {
  box.replaceChildren();
  if (a.status !== ApprovalStatus.PENDING) return;
  const d = mayDecide(a, w);
  if (!d.ok) {
    const text = a.caller?.code === "E_ALREADY_VOTED" ? `Your approval is already counted; ${tally(a)}.` : d.reason || "You may not decide this gate.";
    box.append(h("p", { id: "not-eligible" }, text));
    if (!w.identity && w.known && w.authEnabled) box.append(h("p", null, h("a", { href: `/signin?return=${encodeURIComponent(location.pathname)}` }, "Sign in"), " to decide it."));
    return;
  }
  const reason = h("textarea", { id: "reason", name: "reason", rows: 3, maxlength: 1024, "aria-describedby": "reason-help reason-error" });
  const reasonErr = h("p", { id: "reason-error", class: "field-error" });
  const approveBtn = h("button", { type: "submit", id: "approve", value: "approve", class: "primary" }, "Approve");
  const rejectBtn = h("button", { type: "submit", id: "reject", value: "reject", class: "danger" }, "Reject");
  const fields = inputsForm(a);
  const back = sendBackChoice(a);
  const form = h("form", { id: "decide", novalidate: true },
    fields.el,
    h("label", { for: "reason" }, "Reason"),
    h("p", { id: "reason-help", class: "muted" }, back ? "Recorded with your decision; required to reject. When you send the run back, it is the comment its nodes read." : "Recorded with your decision; required to reject."),
    reason, reasonErr,
    back,
    h("div", { class: "buttons" }, approveBtn, " ", rejectBtn),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const verb = ((ev as SubmitEvent).submitter as HTMLButtonElement | null)?.value === "reject" ? "reject" : "approve";
    const why = reason.value.trim();
    reasonErr.textContent = "";
    if (verb === "reject" && !why) {
      reasonErr.textContent = "Give a reason to reject.";
      reason.setAttribute("aria-invalid", "true");
      reason.focus();
      return;
    }
    reason.removeAttribute("aria-invalid");
    fields.clear();
    approveBtn.disabled = rejectBtn.disabled = true;
    outcome.textContent = verb === "approve" ? "Approving…" : "Rejecting…";
    const before = a;
    const call = verb === "approve"
      ? approvals.approve({ approvalId: a.approvalId, reason: why, inputs: fields.values() }).then((r) => r.approval!)
      : approvals.reject({ approvalId: a.approvalId, reason: why, redoFrom: back?.querySelector("select")?.value ?? "" }).then((r) => r.approval!);
    call.then(
      (next) => {
        outcome.textContent = outcomeText(verb, before, next, w);
        update(next, outcome.textContent);
      },
      (err) => {
        const code = errorCode(err);
        outcome.textContent = code === "E_ALREADY_VOTED" ? `Your approval is already counted; ${tally(before)}.` : errorText(err);
        if (code === "E_INVALID_ARGUMENT" && !errorText(err).includes("redo_from")) fields.showError(errorText(err));
        approveBtn.disabled = rejectBtn.disabled = false;
        if (code === "E_APPROVAL_ALREADY_DECIDED") {
          void approvals.getApproval({ approvalId: a.approvalId }).then((r) => r.approval && update(r.approval), () => undefined);
        }
      },
    );
  });
  box.append(form);
}

/** sendBackChoice is the reject dialog's "Send back to" choice for a playbook approval node
 * that declares rewind_targets (docs/push-back.md): "" rejects as usual, a node sends the run
 * back to it; null when the gate declares none. */
export function sendBackChoice(a: Approval): HTMLElement | null {
  if (!a.rewindTargets.length) return null;
  const sel = h("select", { id: "redo-from", name: "redo-from", "aria-describedby": "redo-from-help" },
    h("option", { value: "" }, "Nowhere: reject, the node fails"),
    a.rewindTargets.map((t) => h("option", { value: t }, t)));
  return h("div", { id: "send-back", class: "field" },
    h("label", { for: "redo-from" }, "Send back to (when rejecting)"),
    sel,
    h("p", { id: "redo-from-help", class: "muted" }, "The run re-executes from this node with your reason as its comment, and this gate opens again when it gets back."));
}

/** outcomeText tells the person what their click did. */
export function outcomeText(verb: string, before: Approval, next: Approval, w: Who): string {
  if (verb === "reject") {
    if (next.status !== ApprovalStatus.REJECTED) return `${approvalStatus(next)}.`;
    if (next.redoFrom) return `Sent back to ${next.redoFrom}. The run re-executes from there with your reason as its comment; this gate opens again (iteration ${(next.iteration || 1) + 1}) when it gets back.`;
    return next.onFail ? `Rejected. The step fails and its on_fail (${next.onFail}) applies.` : "Rejected. The step fails.";
  }
  if (next.status === ApprovalStatus.APPROVED) return "Approved. The run continues.";
  if (next.status === ApprovalStatus.PENDING) {
    // Counted when the answer holds a new vote of the caller's identity. A click on a page
    // loaded before the same person approved through another channel (Slack, the CLI) adds
    // none, though the gate has more votes than the page showed (docs/people.md).
    const mine = (x: Approval): number => x.votes.filter((v) => v.approver === w.identity).length;
    const added = w.identity
      ? mine(next) > mine(before)
      : next.votes.length !== before.votes.length || approvalCount(next) !== approvalCount(before);
    return added ? `Your approval is counted: ${tally(next)}.` : `Your approval is already counted; ${tally(next)}.`;
  }
  return `${approvalStatus(next)}.`;
}

async function watchApproval(p: Page, id: string, on: (a: Approval) => void): Promise<void> {
  for (let attempt = 0; !p.signal.aborted && attempt < 100; attempt++) {
    try {
      for await (const m of approvals.watchApproval({ approvalId: id }, { signal: p.signal })) {
        if (m.approval) on(m.approval);
        attempt = 0;
        if (m.approval && m.approval.status !== ApprovalStatus.PENDING) return;
      }
      return;
    } catch (err) {
      if (isAborted(err) || p.signal.aborted) return;
      await sleep(Math.min(30000, 500 * 2 ** attempt), p.signal);
    }
  }
}

/** watchRun follows a run with WatchRun from its last seen seq, reconnecting after a server
 * restart, and calls on with the grown run until it is final. */
export async function watchRun(p: Page, fr: FullRun, on: (fr: FullRun) => void): Promise<void> {
  for (let attempt = 0; !p.signal.aborted && !isFinal(fr.run.status) && attempt < 100; attempt++) {
    try {
      const from = fr.transitions.length ? fr.transitions[fr.transitions.length - 1].seq + 1n : 1n;
      for await (const m of runs.watchRun({ runId: fr.run.runId, fromSeq: from }, { signal: p.signal })) {
        attempt = 0;
        const next: FullRun = { run: m.run ?? fr.run, transitions: fr.transitions, plan: fr.plan };
        if (m.transition && m.transition.seq >= from) next.transitions = [...fr.transitions, m.transition];
        if (next.run.contentHash !== fr.run.contentHash) {
          try { next.plan = (await runs.getRun({ runId: fr.run.runId, pageSize: 1 }, { signal: p.signal })).plan; } catch { /* keep the old plan */ }
        }
        const said = next.run.status !== fr.run.status;
        fr = next;
        on(fr);
        if (said) announce(`Run ${fr.run.name} is now ${runStatus(fr.run.status).toLowerCase()}.`);
      }
      if (isFinal(fr.run.status)) return;
    } catch (err) {
      if (isAborted(err) || p.signal.aborted) return;
      if (!(err instanceof Error)) return;
      await sleep(Math.min(30000, 500 * 2 ** attempt), p.signal);
    }
  }
}
