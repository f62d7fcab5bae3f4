// run.ts: one run (/runs/<id>): status, the chain or DAG with the steps not yet started, a
// timeline (start, duration, status, retries, gate waits), each step's evidence, each gate's
// decision, and the evidence pack as a JSON download. Live while the run is active (WatchRun).
import { h, replace, dl } from "./dom.js";
import { ready, setTitle, showError } from "./app.js";
import type { Page } from "./app.js";
import { runs, isAborted } from "./api.js";
import { fullRun, listApprovals } from "./data.js";
import type { FullRun } from "./data.js";
import { duration, kindWord, runStatus, runStatusClass, tally, timeEl, repoOf, workflowRunOf, isFinal, when } from "./format.js";
import { decisionBlock, evidenceTable, stepInfos, votesList } from "./parts.js";
import type { StepInfo } from "./parts.js";
import { runLevelIndex } from "./parts.js";
import { drawGraph } from "./graph.js";
import type { GraphNode } from "./graph.js";
import { watchRun } from "./gate.js";
import { RunKind } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import type { Approval } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import { ApprovalStatus } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";

function graphNodes(fr: FullRun, infos: StepInfo[]): GraphNode[] {
  const plan = new Map((fr.plan?.steps ?? []).map((p) => [p.index, p]));
  const playbook = fr.run.kind === RunKind.PLAYBOOK;
  const steps = infos.filter((i) => i.index !== runLevelIndex);
  const total = Math.max(fr.run.totalSteps, steps.length ? steps[steps.length - 1].index + 1 : 0);
  const known = new Map(infos.map((i) => [i.index, i]));
  const out: GraphNode[] = [];
  for (let i = 0; i < total; i++) {
    const info = known.get(i) ?? { index: i, name: `step ${i + 1}`, type: "", starts: 0, startedAt: 0, finishedAt: 0, gateOpenedAt: 0, gateDecidedAt: 0, state: "not started" };
    const p = plan.get(i);
    out.push({ info, depends: playbook ? (p?.depends ?? []) : i > 0 ? [i - 1] : [], gate: p?.gate ?? (info.type === "confirm" || info.type === "approval") });
  }
  return out;
}

function timeline(infos: StepInfo[]): HTMLElement {
  return h("table", { id: "timeline" },
    h("caption", { class: "visually-hidden" }, "Steps in plan order"),
    h("thead", null, h("tr", null, ["Step", "Status", "Started", "Duration", "Retries", "Gate wait"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", null, infos.map((s) => h("tr", null,
      h("th", { scope: "row" }, s.name, s.type ? h("span", { class: "muted" }, ` (${s.type})`) : null),
      h("td", null, h("span", { class: `badge st-${s.state.toLowerCase().replace(/\s+/g, "-")}` }, s.state)),
      h("td", null, s.startedAt ? when(s.startedAt) : "—"),
      h("td", null, s.startedAt && s.finishedAt ? duration(s.finishedAt - s.startedAt) : s.startedAt ? (s.state === "waiting" ? "waiting" : "running") : "—"),
      h("td", null, String(Math.max(0, s.starts - 1))),
      h("td", null, s.gateOpenedAt ? (s.gateDecidedAt ? duration(s.gateDecidedAt - s.gateOpenedAt) : `waiting ${duration(Date.now() - s.gateOpenedAt)}`) : "—"),
    ))),
  );
}

function gateArticle(a: Approval): HTMLElement {
  return h("article", { class: "gate-decision", id: `decision-${a.approvalId}`, "aria-labelledby": `decision-h-${a.approvalId}` },
    h("h3", { id: `decision-h-${a.approvalId}` }, h("a", { href: `/approvals/${encodeURIComponent(a.approvalId)}` }, a.stepName)),
    a.status === ApprovalStatus.PENDING ? h("p", null, "Waiting for a decision: ", h("span", { class: "tally" }, tally(a)), ". Requested ", timeEl(a.requestedAt), ".") : decisionBlock(a),
    votesList(a),
  );
}

/** joinEvidencePages joins the JSON array texts of an evidence pack's pages into one array. */
export function joinEvidencePages(pages: string[]): string {
  const parts = pages.map((p) => p.trim().replace(/^\[/, "").replace(/\]$/, "").trim()).filter((p) => p !== "");
  return parts.length === 0 ? "[]" : `[\n${parts.join(",\n")}\n]`;
}

/** evidencePack reads every page of the run's evidence pack and joins them into one JSON array. */
export async function evidencePack(runId: string, signal?: AbortSignal): Promise<string> {
  const pages: string[] = [];
  let pageToken = "";
  for (let i = 0; i < 10000; i++) {
    const r = await runs.getEvidencePack({ runId, pageToken }, { signal });
    pages.push(r.evidencePackJson);
    if (!r.nextPageToken) break;
    pageToken = r.nextPageToken;
  }
  return joinEvidencePages(pages);
}

/** runPage renders /runs/<id>. */
export async function runPage(p: Page): Promise<void> {
  const id = p.params[0];
  setTitle(`Run ${id}`);
  let [fr, gates] = await Promise.all([fullRun(id, p.signal), listApprovals({ runId: id }, p.signal)]);
  setTitle(`Run ${fr.run.name}`);
  const statusEl = h("span", { id: "run-status", class: runStatusClass(fr.run.status) }, runStatus(fr.run.status));
  const graphBox = h("div", { class: "graph-box" });
  const timelineBox = h("div");
  const evidenceBox = h("div");
  const gatesBox = h("div");
  const dlBtn = h("button", { type: "button", id: "download-evidence" }, "Download evidence pack (JSON)");
  const dlMsg = h("span", { role: "status", class: "muted" });
  dlBtn.addEventListener("click", async () => {
    dlBtn.disabled = true;
    dlMsg.textContent = "Preparing…";
    try {
      const text = await evidencePack(id);
      const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
      const a = h("a", { href: url, download: `${id}-evidence.json`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      dlMsg.textContent = "Downloaded.";
    } catch (err) {
      showError(err);
      dlMsg.textContent = "";
    } finally {
      dlBtn.disabled = false;
    }
  });
  const draw = (): void => {
    const infos = stepInfos(fr.transitions, fr.plan?.steps);
    const nodes = graphNodes(fr, infos);
    const kind = fr.run.kind === RunKind.PLAYBOOK ? "DAG" : "chain";
    const done = nodes.filter((n) => n.info.state !== "not started").length;
    graphBox.replaceChildren(drawGraph(nodes, `The run's ${kind} of ${nodes.length} steps: ${done} started, ${nodes.length - done} not started.`));
    timelineBox.replaceChildren(timeline(nodes.map((n) => n.info)));
    evidenceBox.replaceChildren(evidenceTable("evidence-table", infos));
    gatesBox.replaceChildren(...(gates.length ? gates.slice().reverse().map(gateArticle) : [h("p", { class: "none" }, "No gate has opened in this run.")]));
    statusEl.textContent = runStatus(fr.run.status);
    statusEl.className = runStatusClass(fr.run.status);
  };
  const wf = workflowRunOf(fr.run);
  replace(p.main,
    h("h1", null, "Run ", h("span", { class: "run-name" }, fr.run.name)),
    h("p", null, "Status: ", statusEl, fr.run.currentStep && !isFinal(fr.run.status) ? h("span", { class: "muted" }, ` (at ${fr.run.currentStep})`) : null),
    dl("run-facts", [
      [kindWord(fr.run), fr.run.name],
      ["Run id", h("code", { id: "run-id" }, fr.run.runId)],
      ["Content hash", h("code", { class: "hash" }, fr.run.contentHash)],
      ["Repository", repoOf(fr.run)],
      ["Workflow run", wf],
      ["Started by", fr.run.startedBy],
      ["Started", timeEl(fr.run.startedAt)],
      ["Finished", timeEl(fr.run.completedAt)],
      ["Failure", fr.run.errorContext ? h("pre", { class: "output" }, fr.run.errorContext) : ""],
    ]),
    h("p", null, dlBtn, " ", dlMsg),
    h("section", { id: "graph", "aria-labelledby": "graph-h" }, h("h2", { id: "graph-h" }, fr.run.kind === RunKind.PLAYBOOK ? "Nodes" : "Steps"), graphBox),
    h("section", { id: "timeline-section", "aria-labelledby": "timeline-h" }, h("h2", { id: "timeline-h" }, "Timeline"), timelineBox),
    h("section", { id: "gates", "aria-labelledby": "gates-h" }, h("h2", { id: "gates-h" }, "Gate decisions"), gatesBox),
    h("section", { id: "evidence", "aria-labelledby": "evidence-h" }, h("h2", { id: "evidence-h" }, "Evidence"), evidenceBox),
  );
  draw();
  ready(p.main);
  let gatesSeen = fr.transitions.length;
  void watchRun(p, fr, async (next) => {
    fr = next;
    // A gate opened or was decided since the last look: read the run's gates again.
    if (fr.transitions.slice(gatesSeen).some((t) => t.kind === 4 || t.kind === 5) || isFinal(fr.run.status)) {
      try {
        gates = await listApprovals({ runId: id }, p.signal);
      } catch (err) {
        if (!isAborted(err)) showError(err);
      }
    }
    gatesSeen = fr.transitions.length;
    draw();
  });
}
