// dom.ts: building the page with DOM APIs. Text from the API is only ever set as text nodes
// (textContent); nothing here parses HTML, so a prompt or an output can never become markup.

/** A child of h(): a node, text (set as a text node), or nothing. */
export type Child = Node | string | number | null | undefined | false | Child[];

/** Attributes of h(): strings are set with setAttribute; booleans add or omit the attribute. */
export type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

function append(el: Node, c: Child): void {
  if (c === null || c === undefined || c === false) return;
  if (Array.isArray(c)) {
    for (const x of c) append(el, x);
    return;
  }
  el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
}

function setAttrs(el: Element, attrs: Attrs | null | undefined): void {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (typeof v === "function") {
      el.addEventListener(k.replace(/^on/, ""), v);
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
}

/** h creates an HTML element with attributes and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const svgNS = "http://www.w3.org/2000/svg";

/** s creates an SVG element with attributes and children. */
export function s(tag: string, attrs?: Attrs | null, ...children: Child[]): SVGElement {
  const el = document.createElementNS(svgNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** replace empties el and appends children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** byId returns the element with the id, or throws (the shell in index.html has them all). */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`console: no #${id} in the page`);
  return el as T;
}

/** dl builds a description list from [term, value] pairs, skipping empty values. */
export function dl(id: string | null, pairs: [string, Child][]): HTMLDListElement {
  const d = h("dl", id ? { id } : null);
  for (const [k, v] of pairs) {
    if (v === "" || v === null || v === undefined || v === false) continue;
    d.append(h("dt", null, k), h("dd", null, v));
  }
  return d;
}
