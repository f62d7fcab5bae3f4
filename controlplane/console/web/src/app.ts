// app.ts: what every page shares — the header (who is signed in, Sign out), the error line,
// the live region, and the page's lifetime (an AbortSignal that ends when the person leaves).
import { byId, replace, h } from "./dom.js";
import { errorText, isAborted, refreshWho, whoAmI } from "./api.js";
import type { Who } from "./api.js";

/** Page is one page's context: where to draw it and when to stop its calls and streams. */
export interface Page {
  /** main is the page's <main>. */
  main: HTMLElement;
  /** signal aborts when the person navigates away. */
  signal: AbortSignal;
  /** params are the path's parameters (a run or approval id). */
  params: string[];
  /** query is the URL's query. */
  query: URLSearchParams;
}

/** showError shows err in #error as a person reads it; null hides it. */
export function showError(err: unknown): void {
  const el = byId("error");
  if (err === null || isAborted(err)) {
    el.hidden = true;
    el.replaceChildren();
    return;
  }
  el.hidden = false;
  const text = errorText(err);
  replace(el, text);
  if (/Sign in to continue/.test(text)) {
    el.append(" ", h("a", { href: `/signin?return=${encodeURIComponent(location.pathname + location.search)}` }, "Sign in"));
  }
}

/** announce says text in the polite live region (screen readers read it out). */
export function announce(text: string): void {
  const el = byId("live");
  el.textContent = text;
}

/** ready marks the page loaded (aria-busy false); tests and benchmarks wait for it. */
export function ready(main: HTMLElement): void {
  main.setAttribute("aria-busy", "false");
}

/** setTitle sets the document title. */
export function setTitle(t: string): void {
  document.title = `${t} — rbook`;
}

/** renderHeader shows who is signed in, the Sign in link or the Sign out button. */
export async function renderHeader(): Promise<Who | null> {
  let w: Who;
  try {
    w = await whoAmI();
  } catch (err) {
    showError(err);
    return null;
  }
  const whoEl = byId("whoami");
  const out = byId<HTMLButtonElement>("signout");
  const signin = byId("nav-signin");
  if (w.identity) {
    const name = w.displayName && w.displayName !== w.identity ? `${w.displayName} (${w.identity})` : w.identity;
    replace(whoEl, "Signed in as ", h("strong", null, name), w.roles.length ? ` · ${w.roles.join(", ")}` : "");
  } else {
    whoEl.replaceChildren();
  }
  out.hidden = w.method !== "session";
  signin.hidden = !!w.identity || (w.known && !w.authEnabled);
  return w;
}

/** signOut ends the session (POST /auth/logout) and goes to the sign-in page. */
export async function signOut(): Promise<void> {
  try {
    const r = await fetch("/auth/logout", { method: "POST", credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!r.ok && r.status !== 204) throw new Error(`Sign out failed (HTTP ${r.status}); try again.`);
  } catch (err) {
    showError(err);
    return;
  }
  refreshWho();
  await renderHeader();
  navigate("/signin");
}

let navigateFn: (path: string) => void = (p) => location.assign(p);

/** setNavigate installs the router's navigate (history.pushState and render). */
export function setNavigate(fn: (path: string) => void): void {
  navigateFn = fn;
}

/** navigate shows another page of the app without a reload. */
export function navigate(path: string): void {
  navigateFn(path);
}

/** sleep waits ms or until signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}
