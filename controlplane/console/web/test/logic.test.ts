// logic.test.ts: the console's pure functions (what runs after a gate, how transitions fold into
// steps, what a click's outcome says, where sign-in may return to, how an evidence pack's pages
// join), run by `npm test` under Node's test runner.
import "./setup.js";
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { stepsAfter, outcomeText, sendBackChoice } from "../src/gate.js";
import { stepInfos } from "../src/parts.js";
import { safeNext } from "../src/signin.js";
import { joinEvidencePages } from "../src/run.js";
import { approvalStatus, duration, oneLine, tally, voterLabel, workflowRunURL } from "../src/format.js";
import { ApprovalSchema, ApprovalStatus, ApprovalVoteSchema, GateNotificationSchema } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import { escalatedText, noticeRow, noticesKey } from "../src/notices.js";
import { PlanStepSchema, RunKind, RunSchema, StepStatus, TransitionKind, TransitionSchema, EvidenceSchema } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import type { Who } from "../src/api.js";

const step = (index: number, name: string, depends: number[] = [], gate = false) =>
  create(PlanStepSchema, { index, name, type: gate ? "approval" : "deterministic", depends, gate });

test("a runbook's gate is followed by every later step of the chain", () => {
  const steps = [step(0, "a"), step(1, "gate", [], true), step(2, "b"), step(3, "c")];
  assert.deepEqual(stepsAfter(steps, 1, RunKind.RUNBOOK).map((s) => s.name), ["b", "c"]);
});

test("a playbook's gate is followed only by the nodes that depend on it, directly or not", () => {
  const steps = [step(0, "build"), step(1, "lint", [0]), step(2, "review", [0], true), step(3, "publish", [2]), step(4, "announce", [3, 1])];
  assert.deepEqual(stepsAfter(steps, 2, RunKind.PLAYBOOK).map((s) => s.name), ["publish", "announce"]);
});

test("transitions fold into steps with retries, durations and gate waits", () => {
  const t = (seq: number, kind: TransitionKind, i: number, ms: number, status?: StepStatus) =>
    create(TransitionSchema, { seq: BigInt(seq), kind, stepIndex: i, stepName: `s${i}`, stepType: "check", time: timestampFromMs(ms),
      evidence: status ? create(EvidenceSchema, { stepName: `s${i}`, status, output: "out" }) : undefined });
  const infos = stepInfos([
    t(1, TransitionKind.RUN_STARTED, -1, 0),
    t(2, TransitionKind.STEP_STARTED, 0, 1000),
    t(3, TransitionKind.STEP_STARTED, 0, 2000),
    t(4, TransitionKind.STEP_FINISHED, 0, 2500, StepStatus.PASS),
    t(5, TransitionKind.STEP_STARTED, 1, 3000),
    t(6, TransitionKind.GATE_OPENED, 1, 3000),
  ], [step(0, "s0"), step(1, "s1"), step(2, "s2")]);
  assert.equal(infos.length, 3);
  assert.deepEqual([infos[0].state, infos[0].starts, infos[0].finishedAt - infos[0].startedAt], ["PASS", 2, 500]);
  assert.deepEqual([infos[1].state, infos[1].gateOpenedAt], ["waiting", 3000]);
  assert.equal(infos[2].state, "not started");
});

test("the cancel audit entry is evidence after every step", () => {
  const cancel = create(TransitionSchema, { seq: 9n, kind: TransitionKind.RUN_FINISHED, stepIndex: -1, time: timestampFromMs(5000),
    evidence: create(EvidenceSchema, { stepName: "CANCEL", type: "cancel", status: StepStatus.PASS, output: "cancelled by alice" }) });
  const infos = stepInfos([cancel], [step(0, "s0")]);
  assert.deepEqual(infos.map((i) => [i.name, i.state]), [["s0", "not started"], ["CANCEL", "PASS"]]);
});

const who: Who = Object.assign(create((await import("../../../../clients/ts/gen/rbook/v1/identity_service_pb.js")).WhoAmIResponseSchema, { identity: "alice", roles: ["approver"] }), { known: true });
const vote = (approver: string) => create(ApprovalVoteSchema, { approver, verdict: ApprovalStatus.APPROVED });
const gate = (status: ApprovalStatus, voters: string[], onFail = "") =>
  create(ApprovalSchema, { status, approvalsRequired: 2, votes: voters.map(vote), onFail });

test("the outcome of a click says what the server did with it", () => {
  const before = gate(ApprovalStatus.PENDING, []);
  assert.equal(outcomeText("approve", before, gate(ApprovalStatus.PENDING, ["alice"]), who), "Your approval is counted: 1 of 2 approvals.");
  const counted = gate(ApprovalStatus.PENDING, ["alice"]);
  assert.equal(outcomeText("approve", counted, gate(ApprovalStatus.PENDING, ["alice"]), who), "Your approval is already counted; 1 of 2 approvals.");
  assert.equal(outcomeText("approve", counted, gate(ApprovalStatus.APPROVED, ["alice", "bob"]), who), "Approved. The run continues.");
  // A page loaded before alice approved in Slack: the answer has her Slack vote, not a new one.
  assert.equal(outcomeText("approve", before, gate(ApprovalStatus.PENDING, ["slack:T0001/U0001"]), who), "Your approval is already counted; 1 of 2 approvals.");
  assert.equal(outcomeText("reject", before, gate(ApprovalStatus.REJECTED, [], "rollback"), who), "Rejected. The step fails and its on_fail (rollback) applies.");
  assert.equal(tally(gate(ApprovalStatus.PENDING, ["alice", "alice"])), "1 of 2 approvals");
});

test("a push-back says where the run went back and that the gate opens again", () => {
  const sent = create(ApprovalSchema, { status: ApprovalStatus.REJECTED, redoFrom: "build", iteration: 1, rewindTargets: ["build"] });
  assert.equal(outcomeText("reject", gate(ApprovalStatus.PENDING, []), sent, who),
    "Sent back to build. The run re-executes from there with your reason as its comment; this gate opens again (iteration 2) when it gets back.");
  assert.equal(approvalStatus(sent), "Sent back to build");
  assert.equal(sendBackChoice(create(ApprovalSchema, {})), null);
});

test("a vote shows its person beside the identity, and one person counts once", () => {
  const alice = (approver: string) => create(ApprovalVoteSchema, { approver, person: "alice", personName: "Alice Example", verdict: ApprovalStatus.APPROVED });
  assert.equal(voterLabel(alice("github:alice")), "Alice Example (github:alice)");
  assert.equal(voterLabel(create(ApprovalVoteSchema, { approver: "bob", person: "bob" })), "bob");
  assert.equal(voterLabel(create(ApprovalVoteSchema, { approver: "carol" })), "carol");
  const g = create(ApprovalSchema, { status: ApprovalStatus.PENDING, approvalsRequired: 2, votes: [alice("github:alice"), alice("alice")] });
  assert.equal(tally(g), "1 of 2 approvals");
});

test("sign-in returns only to a path of this origin", () => {
  const q = (v: string) => new URLSearchParams({ return: v });
  assert.equal(safeNext(q("/approvals/a-1?x=1")), "/approvals/a-1?x=1");
  for (const bad of ["//evil.example/", "/\\evil.example", "https://evil.example/", "javascript:alert(1)", "", "/a b"]) {
    assert.equal(safeNext(q(bad)), "/", bad);
  }
});

test("an evidence pack's pages join into one JSON array", () => {
  assert.equal(joinEvidencePages(["[]"]), "[]");
  const joined = joinEvidencePages(['[\n  {"step_name": "a"}\n]', '[{"step_name": "b"}]', "[]"]);
  assert.deepEqual(JSON.parse(joined), [{ step_name: "a" }, { step_name: "b" }]);
});

test("people read times, prompts and links as they expect", () => {
  assert.equal(duration(90_500), "1m 30s");
  assert.equal(duration(3_600_000 * 25), "1d 1h");
  assert.equal(oneLine("### ⏸ Step 5/6 · confirm\n\n- Run: x"), "⏸ Step 5/6 · confirm");
  const run = create(RunSchema, { reportedWorkflowRun: { repository: "octo/repo", runId: "42" } });
  assert.equal(workflowRunURL(run), "https://github.com/octo/repo/actions/runs/42");
  const odd = create(RunSchema, { reportedWorkflowRun: { repository: "octo/repo\"><x", runId: "42" } });
  assert.equal(workflowRunURL(odd), "");
});

test("an Approve refusal names the input field it is about", async () => {
  const { refusedField } = await import("../src/inputs.js");
  assert.equal(refusedField("approval a-x: input target: must be one of blue, green, got \"red\"; nothing was decided"), "target");
  assert.equal(refusedField("reason is 2000 bytes, over the limit of 1024"), "");
});

test("a gate's notices: escalation step and one row per notification, no receiver address", () => {
  const a = create(ApprovalSchema, {
    escalations: 2, escalatedAt: timestampFromMs(Date.UTC(2026, 4, 12, 10, 30)),
    notifications: [
      create(GateNotificationSchema, { eventId: "gate.opened:a-1", type: "gate.opened", channel: "ops-mail", channelKind: "email", status: "delivered" }),
      create(GateNotificationSchema, { eventId: "gate.escalated:a-1:2", type: "gate.escalated", channel: "hooks", channelKind: "webhook", status: "pending", attempts: 3 }),
    ],
  });
  assert.equal(escalatedText(a), "Escalated (step 2)");
  assert.deepEqual(a.notifications.map(noticeRow), [
    ["ops-mail (email)", "gate.opened", "delivered", "-"],
    ["hooks (webhook)", "gate.escalated", "pending", "3 failed attempts"],
  ]);
  assert.equal(escalatedText(create(ApprovalSchema, {})), "");
  const b = create(ApprovalSchema, { escalations: 2, notifications: [create(GateNotificationSchema, { eventId: "gate.opened:a-1", channel: "ops-mail", status: "pending" })] });
  assert.notEqual(noticesKey(a), noticesKey(b));
});
