// main.ts: the console's router. Every page has a stable URL; links inside the app change the
// page without a reload (history API), and each page's calls and streams end when it is left.
import { byId, h, replace } from "./dom.js";
import { renderHeader, setNavigate, showError, signOut, ready, setTitle } from "./app.js";
import type { Page } from "./app.js";
import { errorCode, errorText } from "./api.js";
import { waitingPage } from "./waiting.js";
import { gatePage } from "./gate.js";
import { runsPage } from "./runs.js";
import { runPage } from "./run.js";
import { signinPage } from "./signin.js";

type Render = (p: Page) => Promise<void>;

const routes: [RegExp, Render][] = [
  [/^\/$/, waitingPage],
  [/^\/approvals\/([^/]+)\/?$/, gatePage],
  [/^\/runs\/?$/, runsPage],
  [/^\/runs\/([^/]+)\/?$/, runPage],
  [/^\/signin\/?$/, signinPage],
];

let current: AbortController | null = null;

async function notFound(p: Page): Promise<void> {
  setTitle("Not found");
  replace(p.main, h("h1", null, "Not found"), h("p", null, "There is no page at this address. ", h("a", { href: "/" }, "Go to the gates waiting for you"), "."));
  ready(p.main);
}

async function render(): Promise<void> {
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  const main = byId("main");
  main.setAttribute("aria-busy", "true");
  showError(null);
  let fn: Render = notFound;
  let params: string[] = [];
  for (const [re, r] of routes) {
    const m = re.exec(location.pathname);
    if (m) {
      fn = r;
      params = m.slice(1).map((x) => decodeURIComponent(x));
      break;
    }
  }
  for (const a of document.querySelectorAll<HTMLAnchorElement>("#nav a")) {
    const here = a.pathname === "/" ? location.pathname === "/" : location.pathname.startsWith(a.pathname);
    if (here) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  try {
    await fn({ main, signal: ctl.signal, params, query: new URLSearchParams(location.search) });
  } catch (err) {
    if (ctl.signal.aborted) return;
    showError(err);
    const code = errorCode(err);
    if (code === "E_APPROVAL_NOT_FOUND" || code === "E_RUN_NOT_FOUND") {
      showError(null);
      setTitle("Not found");
      replace(main, h("h1", null, "Not found"), h("p", null, errorText(err)), h("p", null, h("a", { href: "/" }, "Go to the gates waiting for you"), "."));
    } else if (!main.querySelector("h1")) {
      replace(main, h("h1", null, "This page could not be loaded"), h("p", null, "The message above says why; reload the page to try again."));
    }
    ready(main);
  }
}

function go(path: string): void {
  history.pushState(null, "", path);
  void render().then(() => byId("main").focus({ preventScroll: false }));
}

setNavigate(go);

document.addEventListener("click", (ev) => {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const a = (ev.target as Element | null)?.closest?.("a");
  if (!a || a.target || a.hasAttribute("download") || a.origin !== location.origin) return;
  if (a.pathname.startsWith("/auth/") || a.getAttribute("href")?.startsWith("#")) return;
  ev.preventDefault();
  go(a.pathname + a.search);
});
window.addEventListener("popstate", () => void render());
// A page the browser keeps in its back/forward cache must not keep its streams open: over
// HTTP/1.1 a browser opens at most six connections to one host, so a few cached gate pages
// would leave the next page waiting. Leaving ends the page's calls; coming back renders anew.
window.addEventListener("pagehide", () => current?.abort());
window.addEventListener("pageshow", (ev) => {
  if (ev.persisted) void render();
});
byId("signout").addEventListener("click", () => void signOut());

void renderHeader();
void render();
