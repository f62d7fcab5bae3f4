// graph.ts: the run's chain (runbook) or DAG (playbook) as inline SVG built with DOM APIs:
// nodes in columns by depth, edges from each node's dependencies, colour by state. Step names
// are set as text nodes.
import { s } from "./dom.js";
import type { StepInfo } from "./parts.js";

/** GraphNode is one node to draw: a step with its dependencies (indexes). */
export interface GraphNode {
  info: StepInfo;
  depends: number[];
  gate: boolean;
}

const W = 168, H = 44, GX = 48, GY = 16;

/** drawGraph returns an <svg id="run-graph"> of the nodes. A runbook's chain has each step
 * depend on the one before; a playbook's nodes list their depends. */
export function drawGraph(nodes: GraphNode[], label: string): SVGElement {
  const byIndex = new Map(nodes.map((n) => [n.info.index, n]));
  const depth = new Map<number, number>();
  const depthOf = (i: number, seen: Set<number>): number => {
    const d = depth.get(i);
    if (d !== undefined) return d;
    if (seen.has(i)) return 0;
    seen.add(i);
    const n = byIndex.get(i);
    let v = 0;
    for (const p of n?.depends ?? []) if (byIndex.has(p)) v = Math.max(v, depthOf(p, seen) + 1);
    depth.set(i, v);
    return v;
  };
  const cols: number[][] = [];
  for (const n of nodes) {
    const d = depthOf(n.info.index, new Set());
    (cols[d] ??= []).push(n.info.index);
  }
  const chain = cols.every((c) => c.length <= 1);
  const pos = new Map<number, { x: number; y: number }>();
  // A chain wraps into rows of up to 5 so a long runbook stays readable.
  const perRow = 5;
  cols.forEach((c, d) => c.forEach((i, k) => {
    pos.set(i, chain
      ? { x: 8 + (d % perRow) * (W + GX), y: 8 + Math.floor(d / perRow) * (H + GY * 2) }
      : { x: 8 + d * (W + GX), y: 8 + k * (H + GY) });
  }));
  let maxX = 0, maxY = 0;
  for (const p of pos.values()) { maxX = Math.max(maxX, p.x + W); maxY = Math.max(maxY, p.y + H); }
  const svg = s("svg", { id: "run-graph", role: "img", "aria-label": label, viewBox: `0 0 ${maxX + 8} ${maxY + 8}`, width: maxX + 8, height: maxY + 8, class: "graph" });
  svg.append(s("title", null, label));
  svg.append(s("defs", null, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" }, s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }))));
  for (const n of nodes) {
    const to = pos.get(n.info.index)!;
    for (const dep of n.depends) {
      const from = pos.get(dep);
      if (!from) continue;
      const wrap = from.y !== to.y && chain;
      const d = wrap
        ? `M ${from.x + W / 2} ${from.y + H} L ${from.x + W / 2} ${from.y + H + GY} L ${to.x + W / 2} ${from.y + H + GY} L ${to.x + W / 2} ${to.y}`
        : `M ${from.x + W} ${from.y + H / 2} C ${from.x + W + GX / 2} ${from.y + H / 2}, ${to.x - GX / 2} ${to.y + H / 2}, ${to.x} ${to.y + H / 2}`;
      svg.append(s("path", { d, class: "edge", "marker-end": "url(#arrow)" }));
    }
  }
  for (const n of nodes) {
    const p = pos.get(n.info.index)!;
    const state = n.info.state;
    const name = n.info.name.length > 22 ? `${n.info.name.slice(0, 21)}…` : n.info.name;
    svg.append(s("g", { class: `node st-${state.toLowerCase().replace(/\s+/g, "-")}${n.gate ? " gate" : ""}`, "data-status": state, transform: `translate(${p.x} ${p.y})` },
      s("title", null, `${n.info.name} (${n.info.type}): ${state}`),
      s("rect", { width: W, height: H, rx: n.gate ? 14 : 4 }),
      s("text", { x: 10, y: 18, class: "node-name" }, name),
      s("text", { x: 10, y: 35, class: "node-state" }, `${n.gate ? "gate · " : ""}${state}`),
    ));
  }
  return svg;
}
