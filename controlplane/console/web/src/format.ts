// format.ts: how times, durations, statuses and tallies are written on the page.
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { h } from "./dom.js";
import { RunStatus, StepStatus, RunKind } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import type { Run } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import { ApprovalStatus } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import type { Approval, ApprovalVote } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";

/** ms returns a timestamp in milliseconds since the epoch, or 0 when unset. */
export function ms(t: Timestamp | undefined): number {
  return t ? timestampDate(t).getTime() : 0;
}

/** when writes a time as "2026-01-02 03:04:05 UTC". */
export function when(t: Timestamp | undefined | number): string {
  const n = typeof t === "number" ? t : ms(t);
  if (!n) return "";
  return new Date(n).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

/** timeEl is a <time> element for t, with the machine form in datetime. */
export function timeEl(t: Timestamp | undefined, cls?: string): HTMLTimeElement | string {
  const n = ms(t);
  if (!n) return "";
  return h("time", { datetime: new Date(n).toISOString(), class: cls }, when(n));
}

/** duration writes milliseconds as "1h 2m", "3m 4s", "5s" or "120 ms". */
export function duration(d: number): string {
  if (d < 0) d = 0;
  if (d < 1000) return `${Math.round(d)} ms`;
  let s = Math.floor(d / 1000);
  const days = Math.floor(s / 86400);
  s -= days * 86400;
  const hours = Math.floor(s / 3600);
  s -= hours * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (days) return `${days}d ${hours}h`;
  if (hours) return `${hours}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

/** runStatus writes a run's status in words a person reads. */
export function runStatus(st: RunStatus): string {
  switch (st) {
    case RunStatus.RUNNING: return "Running";
    case RunStatus.PAUSED: return "Waiting at a gate";
    case RunStatus.FAILED: return "Failed";
    case RunStatus.SUCCEEDED: return "Succeeded";
    case RunStatus.CANCELLED: return "Cancelled";
    default: return "Unknown";
  }
}

/** runStatusClass is the CSS class of a run status. */
export function runStatusClass(st: RunStatus): string {
  return `status status-${(RunStatus[st] ?? "UNSPECIFIED").toLowerCase()}`;
}

/** isFinal tells whether the run's status is final. */
export function isFinal(st: RunStatus): boolean {
  return st === RunStatus.FAILED || st === RunStatus.SUCCEEDED || st === RunStatus.CANCELLED;
}

/** stepStatus writes an evidence status as the evidence pack does ("PASS"). */
export function stepStatus(st: StepStatus): string {
  return StepStatus[st] ?? "UNSPECIFIED";
}

/** approvalStatus writes a gate's status in words. */
export function approvalStatus(a: Approval): string {
  switch (a.status) {
    case ApprovalStatus.PENDING: return "Waiting for a decision";
    case ApprovalStatus.APPROVED: return "Approved";
    case ApprovalStatus.REJECTED: return a.decidedBySource === "deadline" ? "Timed out" : a.redoFrom ? `Sent back to ${a.redoFrom}` : "Rejected";
    case ApprovalStatus.EXPIRED: return "Expired";
    case ApprovalStatus.CANCELLED:
      return a.decidedBySource === "interrupted" || a.decidedBySource === "superseded" ? "Withdrawn" : "Cancelled";
    default: return "Unknown";
  }
}

/** approvalCount is the number of distinct people that approved so far: a vote's person, or its identity when it has none (docs/people.md). */
export function approvalCount(a: Approval): number {
  const who = new Set<string>();
  for (const v of a.votes) if (v.verdict === ApprovalStatus.APPROVED) who.add(v.person ? `person:${v.person}` : v.approver);
  return who.size;
}

/** voterLabel is who cast a vote: "Alice Example (github:alice)" when the identity has a person, else the identity. */
export function voterLabel(v: ApprovalVote): string {
  const person = v.personName || v.person;
  return person && person !== v.approver ? `${person} (${v.approver})` : v.approver;
}

/** tally writes "1 of 2 approvals". */
export function tally(a: Approval): string {
  const need = a.approvalsRequired || 1;
  return `${approvalCount(a)} of ${need} approval${need === 1 ? "" : "s"}`;
}

/** kindWord is "Runbook" or "Playbook". */
export function kindWord(r: Run | undefined): string {
  return r?.kind === RunKind.PLAYBOOK ? "Playbook" : "Runbook";
}

/** repoOf returns the run's repository, verified claims first. */
export function repoOf(r: Run | undefined, a?: Approval): string {
  return r?.startedByJob?.repository || r?.reportedWorkflowRun?.repository || a?.github?.repository || "";
}

/** workflowRunOf returns the workflow run id and attempt, verified claims first. */
export function workflowRunOf(r: Run | undefined, a?: Approval): string {
  const j = r?.startedByJob;
  if (j?.runId) return j.runAttempt ? `${j.runId} (attempt ${j.runAttempt})` : j.runId;
  const w = r?.reportedWorkflowRun ?? a?.github;
  if (w?.runId) return w.runAttempt ? `${w.runId} (attempt ${w.runAttempt})` : w.runId;
  return "";
}

/** workflowRunURL links the workflow run on github.com when the repository and id are known. */
export function workflowRunURL(r: Run | undefined, a?: Approval): string {
  const repo = repoOf(r, a);
  const id = r?.startedByJob?.runId || r?.reportedWorkflowRun?.runId || a?.github?.runId || "";
  if (!/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(repo) || !/^\d+$/.test(id)) return "";
  return `https://github.com/${repo}/actions/runs/${id}`;
}

/** oneLine is the first line of text, cut to n characters. */
export function oneLine(text: string, n = 160): string {
  const line = text.split("\n").map((l) => l.replace(/^\s*#+\s*/, "").trim()).find((l) => l !== "") ?? "";
  return line.length > n ? `${line.slice(0, n - 1)}…` : line;
}
