// data.ts: reads that page through the API (never all runs: only what a page shows).
import { approvals, runs } from "./api.js";
import { ApprovalStatus } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import type { Approval } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import { RunStatus } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import type { Run, RunPlan, Transition } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";

/** pendingApprovals returns every pending gate (all pages of ListApprovals), oldest first. */
export async function pendingApprovals(signal: AbortSignal): Promise<Approval[]> {
  return listApprovals({ status: ApprovalStatus.PENDING }, signal).then((l) => l.reverse());
}

/** listApprovals returns every approval matching the filter, newest first (all pages). */
export async function listApprovals(req: { status?: ApprovalStatus; runId?: string }, signal: AbortSignal): Promise<Approval[]> {
  const out: Approval[] = [];
  let pageToken = "";
  for (let i = 0; i < 1000; i++) {
    const r = await approvals.listApprovals({ ...req, pageSize: 40, pageToken }, { signal });
    out.push(...r.approvals);
    if (!r.nextPageToken) break;
    pageToken = r.nextPageToken;
  }
  return out;
}

/** runsFor returns the runs of the given ids, for context on a list of gates. Many gates: the
 * paused runs come from a few pages of ListRuns first; the rest (and few gates) one GetRun each,
 * six at a time (a browser's connections per origin). */
export async function runsFor(ids: string[], signal: AbortSignal): Promise<Map<string, Run>> {
  const want = new Set(ids);
  const got = new Map<string, Run>();
  if (want.size > 12) {
    let pageToken = "";
    for (let i = 0; i < 4 && got.size < want.size; i++) {
      const r = await runs.listRuns({ status: RunStatus.PAUSED, pageSize: 500, pageToken }, { signal });
      for (const run of r.runs) if (want.has(run.runId)) got.set(run.runId, run);
      if (!r.nextPageToken) break;
      pageToken = r.nextPageToken;
    }
  }
  const rest = [...want].filter((id) => !got.has(id));
  const worker = async (): Promise<void> => {
    for (let id = rest.pop(); id !== undefined; id = rest.pop()) {
      try {
        const r = await runs.getRun({ runId: id, pageSize: 1 }, { signal });
        if (r.run) got.set(id, r.run);
      } catch (err) {
        if (signal.aborted) throw err;
        // a gate whose run cannot be read is still listed, without its context
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(6, rest.length) }, worker));
  return got;
}

/** FullRun is a run with every stored transition and its plan. */
export interface FullRun {
  run: Run;
  transitions: Transition[];
  plan?: RunPlan;
}

/** fullRun reads a run and all of its transitions (GetRun, every page). */
export async function fullRun(runId: string, signal: AbortSignal): Promise<FullRun> {
  let pageToken = "";
  const transitions: Transition[] = [];
  let run: Run | undefined;
  let plan: RunPlan | undefined;
  for (let i = 0; i < 10000; i++) {
    const r = await runs.getRun({ runId, pageToken }, { signal });
    run = r.run;
    plan = r.plan ?? plan;
    transitions.push(...r.transitions);
    if (!r.nextPageToken) break;
    pageToken = r.nextPageToken;
  }
  if (!run) throw new Error(`The control plane returned no run for ${runId}; reload the page.`);
  return { run, transitions, plan };
}
