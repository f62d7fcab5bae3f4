// runs.ts: the runs list (/runs): filters in the URL query, one page at a time (ListRuns with
// next_page_token; the page never loads every run).
import { h, replace } from "./dom.js";
import { navigate, ready, setTitle } from "./app.js";
import type { Page } from "./app.js";
import { runs } from "./api.js";
import { runStatus, runStatusClass, timeEl, repoOf } from "./format.js";
import { RunStatus } from "../../../../clients/ts/gen/rbook/v1/run_pb.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";

const statuses: [string, RunStatus, string][] = [
  ["", RunStatus.UNSPECIFIED, "Any"],
  ["running", RunStatus.RUNNING, "Running"],
  ["paused", RunStatus.PAUSED, "Waiting at a gate"],
  ["succeeded", RunStatus.SUCCEEDED, "Succeeded"],
  ["failed", RunStatus.FAILED, "Failed"],
  ["cancelled", RunStatus.CANCELLED, "Cancelled"],
];

/** pageSize is how many runs one page shows. */
const pageSize = 50;

function field(label: string, name: string, value: string, type = "text"): HTMLElement {
  return h("div", { class: "field" }, h("label", { for: `f-${name}` }, label), h("input", { id: `f-${name}`, name, type, value }));
}

/** parseTime reads a datetime-local value (the person's local time) as milliseconds; NaN when bad. */
function parseTime(v: string): number {
  return v ? new Date(v).getTime() : NaN;
}

/** runsPage renders /runs. */
export async function runsPage(p: Page): Promise<void> {
  setTitle("Runs");
  const q = p.query;
  const st = statuses.find((s) => s[0] === (q.get("status") ?? "")) ?? statuses[0];
  const select = h("select", { id: "f-status", name: "status" }, statuses.map(([v, , label]) => h("option", { value: v, selected: v === st[0] }, label)));
  const form = h("form", { id: "run-filters", method: "get", action: "/runs", class: "filters" },
    h("div", { class: "field" }, h("label", { for: "f-status" }, "Status"), select),
    field("Name", "name", q.get("name") ?? ""),
    field("Repository", "repository", q.get("repository") ?? ""),
    field("Started by", "started_by", q.get("started_by") ?? ""),
    field("Started after", "after", q.get("after") ?? "", "datetime-local"),
    field("Started before", "before", q.get("before") ?? "", "datetime-local"),
    h("div", { class: "field" }, h("button", { type: "submit" }, "Filter")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const next = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (typeof v === "string" && v.trim()) next.set(k, v.trim());
    const qs = next.toString();
    navigate(`/runs${qs ? `?${qs}` : ""}`);
  });
  const body = h("div", { id: "runs-body" });
  replace(p.main, h("h1", null, "Runs"), form, body);

  const after = parseTime(q.get("after") ?? "");
  const before = parseTime(q.get("before") ?? "");
  const r = await runs.listRuns({
    status: st[1],
    name: q.get("name") ?? "",
    repository: q.get("repository") ?? "",
    startedBy: q.get("started_by") ?? "",
    startedAfter: Number.isNaN(after) ? undefined : timestampFromMs(after),
    startedBefore: Number.isNaN(before) ? undefined : timestampFromMs(before),
    pageSize,
    pageToken: q.get("page") ?? "",
  }, { signal: p.signal });

  if (r.runs.length === 0) {
    replace(body, h("p", { id: "no-runs" }, "No runs match."));
  } else {
    replace(body,
      h("table", { id: "runs-table" },
        h("caption", { class: "visually-hidden" }, "Runs, newest first"),
        h("thead", null, h("tr", null, ["Run", "Name", "Status", "Repository", "Started by", "Started"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", null, r.runs.map((run) => h("tr", null,
          h("th", { scope: "row" }, h("a", { href: `/runs/${encodeURIComponent(run.runId)}` }, run.runId)),
          h("td", null, run.name),
          h("td", null, h("span", { class: runStatusClass(run.status) }, runStatus(run.status)), run.currentStep && run.status === RunStatus.PAUSED ? h("span", { class: "muted" }, ` at ${run.currentStep}`) : null),
          h("td", null, repoOf(run)),
          h("td", null, run.startedBy),
          h("td", null, timeEl(run.startedAt)),
        ))),
      ),
    );
  }
  const nav: HTMLElement[] = [];
  if (q.get("page")) {
    const first = new URLSearchParams(q);
    first.delete("page");
    nav.push(h("a", { id: "first-page", href: `/runs${first.size ? `?${first}` : ""}` }, "First page"));
  }
  if (r.nextPageToken) {
    const next = new URLSearchParams(q);
    next.set("page", r.nextPageToken);
    nav.push(h("a", { id: "next-page", href: `/runs?${next}` }, "Next page"));
  }
  if (nav.length) body.append(h("nav", { "aria-label": "Pages", class: "pager" }, nav.flatMap((x, i) => (i ? [" · ", x] : [x]))));
  ready(p.main);
}
