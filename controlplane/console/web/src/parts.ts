// parts.ts: pieces the gate page and the run page share — the steps as the transitions tell
// them, the evidence table, a gate's decision and votes, a plan's steps, and the live run.
import { h, dl } from "./dom.js";
import type { Child } from "./dom.js";
import { duration, ms, stepStatus, timeEl, tally, approvalStatus, voterLabel, when } from "./format.js";
import { ApprovalStatus } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import type { Approval } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import { TransitionKind } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import type { Evidence, PlanStep, Transition } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";

/** StepInfo is what the transitions say about one step or node. */
export interface StepInfo {
  index: number;
  name: string;
  type: string;
  /** starts counts STEP_STARTED transitions: retries and loop iterations are starts - 1. */
  starts: number;
  /** startedAt and finishedAt are of the last execution, ms since the epoch; 0 when none. */
  startedAt: number;
  finishedAt: number;
  evidence?: Evidence;
  gateOpenedAt: number;
  gateDecidedAt: number;
  /** state is "not started", "running", "waiting" or the evidence status ("PASS"). */
  state: string;
}

/** runLevelIndex is the StepInfo index of run-level evidence (the CANCEL audit entry): after
 * every step, and never a node of the graph (which draws indexes below total_steps). */
export const runLevelIndex = Number.MAX_SAFE_INTEGER;

/** stepInfos folds transitions into one StepInfo per step index, in index order. */
export function stepInfos(ts: Transition[], plan?: PlanStep[]): StepInfo[] {
  const m = new Map<number, StepInfo>();
  const get = (i: number, name: string, type: string): StepInfo => {
    let s = m.get(i);
    if (!s) {
      s = { index: i, name, type, starts: 0, startedAt: 0, finishedAt: 0, gateOpenedAt: 0, gateDecidedAt: 0, state: "not started" };
      m.set(i, s);
    }
    if (name) s.name = name;
    if (type) s.type = type;
    return s;
  };
  for (const p of plan ?? []) get(p.index, p.name, p.type);
  for (const t of ts) {
    if (t.stepIndex < 0) {
      // The cancel flow's audit entry comes with RUN_FINISHED: evidence of no step, listed last.
      if (t.kind === TransitionKind.RUN_FINISHED && t.evidence) {
        const at = ms(t.time);
        m.set(runLevelIndex, { index: runLevelIndex, name: t.evidence.stepName, type: t.evidence.type, starts: 0, startedAt: at, finishedAt: at,
          evidence: t.evidence, gateOpenedAt: 0, gateDecidedAt: 0, state: stepStatus(t.evidence.status) });
      }
      continue;
    }
    const s = get(t.stepIndex, t.stepName, t.stepType);
    const at = ms(t.time);
    switch (t.kind) {
      case TransitionKind.STEP_STARTED:
        s.starts++;
        s.startedAt = at;
        s.finishedAt = 0;
        s.state = "running";
        break;
      case TransitionKind.STEP_FINISHED:
        s.finishedAt = at;
        if (!s.startedAt) s.startedAt = at;
        if (t.evidence) {
          s.evidence = t.evidence;
          s.state = stepStatus(t.evidence.status);
        }
        break;
      case TransitionKind.GATE_OPENED:
        s.gateOpenedAt = at;
        if (!s.startedAt) s.startedAt = at;
        s.state = "waiting";
        break;
      case TransitionKind.GATE_DECIDED:
        s.gateDecidedAt = at;
        if (s.state === "waiting") s.state = "running";
        break;
    }
  }
  return [...m.values()].sort((a, b) => a.index - b.index);
}

/** pre is a <pre> for text that may be long (queries, outputs), or nothing for "". */
export function pre(text: string | undefined, cls: string): HTMLPreElement | null {
  if (text === undefined || text === "") return null;
  return h("pre", { class: cls, tabindex: 0 }, text);
}

/** evidenceTable lists finished steps: status, input, output, duration. */
export function evidenceTable(id: string, infos: StepInfo[]): HTMLElement {
  const rows = infos.filter((s) => s.evidence);
  if (rows.length === 0) return h("p", { id, class: "none" }, "No step has finished yet.");
  return h("table", { id },
    h("thead", null, h("tr", null, h("th", { scope: "col" }, "Step"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Input"), h("th", { scope: "col" }, "Output"), h("th", { scope: "col" }, "Duration"))),
    h("tbody", null, rows.map((s) => h("tr", null,
      h("th", { scope: "row" }, s.name, h("span", { class: "muted" }, ` (${s.type})`)),
      h("td", null, h("span", { class: `badge st-${s.state.toLowerCase().replace(/\s+/g, "-")}` }, s.state)),
      h("td", null, pre(s.evidence?.input, "input") ?? "—"),
      h("td", null, pre(s.evidence?.output, "output") ?? "—"),
      h("td", null, s.startedAt && s.finishedAt ? duration(s.finishedAt - s.startedAt) : "—"),
    ))),
  );
}

/** votesList lists a gate's votes: who, verdict, reason, when, channel. */
export function votesList(a: Approval): HTMLElement {
  if (a.votes.length === 0) return h("p", { id: "votes-list", class: "none" }, "Nobody has voted yet.");
  return h("ul", { id: "votes-list" }, a.votes.map((v) => h("li", null,
    h("strong", null, voterLabel(v)), v.verified ? "" : " (unverified)",
    ` ${v.verdict === ApprovalStatus.APPROVED ? "approved" : "rejected"}`,
    " at ", timeEl(v.at), v.source ? ` via ${v.source}` : "",
    v.reason ? [": ", h("q", null, v.reason)] : "",
  )));
}

/** decisionBlock says who decided a gate, why, when and through which channel; null while pending. */
export function decisionBlock(a: Approval, id?: string): HTMLElement | null {
  if (a.status === ApprovalStatus.PENDING) return null;
  return h("div", { id: id ?? null, class: "decision" },
    h("p", null, h("strong", null, approvalStatus(a)), a.autoPassed ? " (passed by the auto-pass policy)" : ""),
    dl(null, [
      ["Decided by", h("span", { class: "decided-by" }, a.approver || "—")],
      ["Reason", h("span", { class: "decided-reason" }, a.reason || "—")],
      ["When", ms(a.approvedAt) ? h("time", { class: "decided-at", datetime: new Date(ms(a.approvedAt)).toISOString() }, when(a.approvedAt)) : h("span", { class: "decided-at" }, "—")],
      ["Channel", h("span", { class: "decided-channel" }, a.decidedBySource || "—")],
      ["Tally", h("span", { class: "tally" }, tally(a))],
      a.redoFrom ? ["Sent back to", h("span", { class: "sent-back" }, `${a.redoFrom}: the run re-executes from there with the reason as its comment, and the gate opens again (docs/push-back.md)`)] : ["", ""],
      a.iteration > 1 || a.rewindTargets.length ? ["Iteration", h("span", { class: "iteration" }, String(a.iteration || 1))] : ["", ""],
      a.policy ? ["Policy", `${a.policy.action || "no rule"}${a.policy.rule ? ` (rule ${a.policy.rule})` : ""}${a.policy.reason ? `: ${a.policy.reason}` : ""}${a.policy.shadow ? " — shadow mode" : ""}`] : ["", ""],
    ]),
  );
}

/** planStepItem draws one step of a plan: name, type, rendered input, params, argv, gate. */
export function planStepItem(p: PlanStep, names: Map<number, string>): HTMLLIElement {
  const deps = p.depends.map((d) => names.get(d) ?? String(d));
  const bits: Child[] = [
    h("span", { class: "step-name" }, p.name), " ",
    h("span", { class: "step-type badge" }, p.type),
    p.gate ? [" ", h("span", { class: "badge gate-badge" }, "Gate")] : null,
    p.onFail ? h("span", { class: "muted" }, ` · on failure: ${p.onFail}`) : null,
    p.timeoutSeconds ? h("span", { class: "muted" }, ` · timeout ${duration(p.timeoutSeconds * 1000)}`) : null,
    deps.length ? h("div", { class: "muted" }, `after ${deps.join(", ")}`) : null,
    p.argv.length ? h("div", { class: "argv" }, "argv: ", p.argv.map((x, i) => [i ? " " : "", h("code", null, x)])) : null,
    pre(p.input, "input"),
    pre(p.paramsJson, "params"),
    p.inputs.length ? h("div", { class: "muted plan-inputs" }, "asks the approver for: ",
      p.inputs.map((f, i) => [i ? ", " : "", h("code", null, f.name), f.required ? " (required)" : ""])) : null,
    p.inputTruncated ? h("p", { class: "muted" }, "Input cut to its size limit by the executor.") : null,
  ];
  return h("li", { class: p.gate ? "plan-step gate" : "plan-step" }, bits);
}
