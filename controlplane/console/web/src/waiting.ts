// waiting.ts: "Waiting for me", the landing page: the pending gates the person may decide,
// oldest first, and apart from them those they may not, with the reason. It refreshes itself
// while open (docs/console.md, "Waiting for me").
import { h, replace } from "./dom.js";
import type { Child } from "./dom.js";
import { ready, setTitle, showError, announce, sleep } from "./app.js";
import type { Page } from "./app.js";
import { isAborted, isApprover, whoAmI } from "./api.js";
import type { Who } from "./api.js";
import { pendingApprovals, runsFor } from "./data.js";
import { duration, kindWord, ms, oneLine, repoOf, tally, timeEl, voterLabel, workflowRunOf } from "./format.js";
import type { Approval } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import type { Run } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";

/** refreshMs is how often the page asks for the pending gates again while it is visible. */
const refreshMs = 4000;

/** mayDecide says whether the person may decide a, and if not, why. */
export function mayDecide(a: Approval, w: Who): { ok: boolean; reason: string } {
  if (w.known && !isApprover(w)) {
    return { ok: false, reason: w.identity ? "You have the viewer role: you can see this gate but not decide it." : "Sign in to decide gates." };
  }
  if (a.caller) return { ok: a.caller.mayDecide, reason: a.caller.reason || a.caller.code };
  return { ok: true, reason: "" };
}

function countdown(deadline: number, now: number): string {
  if (!deadline) return "no deadline";
  const left = deadline - now;
  return left <= 0 ? "deadline passed" : `${duration(left)} left`;
}

function item(a: Approval, run: Run | undefined, now: number, why: string): HTMLLIElement {
  const votes = a.votes.map(voterLabel);
  const repo = repoOf(run, a);
  const wf = workflowRunOf(run, a);
  const deadline = ms(a.deadline);
  const dl = h("time", { class: "deadline", datetime: deadline ? new Date(deadline).toISOString() : null, "data-deadline": deadline || null }, countdown(deadline, now));
  const parts: Child[] = [
    h("h3", null, h("a", { href: `/approvals/${encodeURIComponent(a.approvalId)}` }, a.stepName || a.approvalId)),
    h("p", { class: "prompt" }, oneLine(a.prompt) || "(no prompt)"),
    h("dl", { class: "facts" },
      h("dt", null, kindWord(run)), h("dd", { class: "run" }, h("a", { href: `/runs/${encodeURIComponent(a.runId)}` }, run?.name || a.runId)),
      repo ? [h("dt", null, "Repository"), h("dd", { class: "repo" }, repo, wf ? ` · workflow run ${wf}` : "")] : null,
      run?.startedBy ? [h("dt", null, "Started by"), h("dd", { class: "started-by" }, run.startedBy)] : null,
      h("dt", null, "Waiting"), h("dd", { class: "waited", "data-since": ms(a.requestedAt) || null }, duration(now - ms(a.requestedAt))),
      h("dt", null, "Deadline"), h("dd", null, dl),
      h("dt", null, "Tally"), h("dd", null, h("span", { class: "tally" }, tally(a)), votes.length ? h("span", { class: "voters" }, ` — ${votes.join(", ")}`) : null),
    ),
  ];
  if (why) parts.push(h("p", { class: "reason" }, why));
  return h("li", { id: `gate-${a.approvalId}`, class: "gate-card" }, parts);
}

function tick(main: HTMLElement): void {
  const now = Date.now();
  for (const el of main.querySelectorAll<HTMLElement>("[data-deadline]")) el.textContent = countdown(Number(el.dataset.deadline), now);
  for (const el of main.querySelectorAll<HTMLElement>("[data-since]")) el.textContent = duration(now - Number(el.dataset.since));
}

function fingerprint(list: Approval[]): string {
  return list.map((a) => `${a.approvalId}:${a.votes.length}:${a.caller?.mayDecide}`).join(",");
}

/** waitingPage renders "/". */
export async function waitingPage(p: Page): Promise<void> {
  setTitle("Waiting for me");
  const mine = h("ul", { id: "my-gates-list", class: "cards" });
  const others = h("ul", { id: "other-gates-list", class: "cards" });
  const empty = h("p", { id: "no-gates", hidden: true }, "Nothing is waiting for you.");
  const mySection = h("section", { id: "my-gates", "aria-labelledby": "my-gates-h" }, h("h2", { id: "my-gates-h" }, "Gates you may decide"), mine);
  const otherSection = h("section", { id: "other-gates", "aria-labelledby": "other-gates-h" },
    h("h2", { id: "other-gates-h" }, "Gates you cannot decide"), others);
  replace(p.main,
    h("h1", null, "Waiting for me"),
    empty,
    mySection,
    otherSection,
  );
  // The first list is asked for while WhoAmI answers: the page is ready one round trip sooner.
  let firstList: Promise<Approval[]> | null = pendingApprovals(p.signal);
  firstList.catch(() => undefined);
  const w = await whoAmI();
  if (w.known && w.authEnabled && !w.identity) {
    replace(p.main, h("h1", null, "Waiting for me"),
      h("p", { id: "no-gates" }, "Sign in to see the gates waiting for you. ", h("a", { href: "/signin" }, "Sign in")));
    ready(p.main);
    return;
  }
  let last: string | null = null;
  let first = true;
  const ticker = setInterval(() => tick(p.main), 1000);
  p.signal.addEventListener("abort", () => clearInterval(ticker), { once: true });
  while (!p.signal.aborted) {
    try {
      const pending = firstList ?? pendingApprovals(p.signal);
      firstList = null;
      const list = await pending;
      const fp = fingerprint(list);
      if (fp !== last) {
        const byRun = await runsFor([...new Set(list.map((a) => a.runId))], p.signal);
        const now = Date.now();
        const a1: HTMLLIElement[] = [];
        const a2: HTMLLIElement[] = [];
        for (const a of list) {
          const d = mayDecide(a, w);
          (d.ok ? a1 : a2).push(item(a, byRun.get(a.runId), now, d.ok ? "" : d.reason));
        }
        mine.replaceChildren(...a1);
        others.replaceChildren(...a2);
        if (a1.length === 0) mine.replaceChildren(h("li", { class: "none" }, "No gate is waiting for your decision."));
        otherSection.hidden = a2.length === 0;
        empty.hidden = list.length !== 0;
        mySection.hidden = list.length === 0;
        if (!first) announce(`${a1.length} gate${a1.length === 1 ? "" : "s"} waiting for you.`);
        last = fp;
      }
      showError(null);
    } catch (err) {
      if (isAborted(err) || p.signal.aborted) return;
      showError(err);
    }
    if (first) {
      ready(p.main);
      first = false;
    }
    await sleep(document.hidden ? refreshMs * 4 : refreshMs, p.signal);
  }
}
