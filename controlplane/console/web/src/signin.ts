// signin.ts: the sign-in page (/signin): the server's sign-in providers (each a link to
// /auth/login/<id>, a browser redirect) and the auth file's bearer token, posted in the body
// of POST /auth/token (never in a URL). The session is an HttpOnly cookie the page never sees.
import { h, replace } from "./dom.js";
import { navigate, ready, renderHeader, setTitle, showError } from "./app.js";
import type { Page } from "./app.js";
import { refreshWho, whoAmI } from "./api.js";

/** safeNext returns the return query parameter when it is a path of this origin, else "/". */
export function safeNext(q: URLSearchParams): string {
  const n = q.get("return") ?? "";
  return /^\/(?![/\\])[^\s]*$/.test(n) ? n : "/";
}

/** signinPage renders /signin. */
export async function signinPage(p: Page): Promise<void> {
  setTitle("Sign in");
  const w = await whoAmI();
  const next = safeNext(p.query);
  const parts: (HTMLElement | null)[] = [h("h1", null, "Sign in")];
  if (w.method === "local") {
    parts.push(h("p", { id: "signed-in" }, "This is a laptop run: you are the person at the keyboard. No sign-in is needed. Decisions are recorded as ", h("strong", null, w.identity || "you"), "."));
  } else if (w.identity) {
    parts.push(h("p", { id: "signed-in" }, "You are signed in as ", h("strong", null, w.displayName || w.identity), ` (${w.identity})`, w.roles.length ? ` with the role${w.roles.length > 1 ? "s" : ""} ${w.roles.join(", ")}.` : ", without a role."));
  } else if (w.known && !w.authEnabled) {
    parts.push(h("p", { id: "signed-in" }, "This control plane does not check who you are; no sign-in is needed."));
  }
  const providers = w.signInProviders.filter((x) => x.kind !== "token");
  if (providers.length) {
    parts.push(h("ul", { id: "providers", class: "providers" }, providers.map((x) =>
      h("li", null, h("a", { class: "button", href: `/auth/login/${encodeURIComponent(x.id)}?return=${encodeURIComponent(next)}` }, x.label || `Sign in with ${x.id}`)))));
  }
  if (w.signInProviders.some((x) => x.kind === "token") || (w.known && w.authEnabled && w.signInProviders.length === 0)) {
    const token = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
    const msg = h("p", { id: "token-error", role: "status", class: "field-error" });
    const form = h("form", { id: "token-form", class: "token-form" },
      h("h2", null, "With a token"),
      h("p", { class: "muted" }, "A bearer token from the control plane's auth file, as the rbook CLI uses (RBOOK_TOKEN)."),
      h("label", { for: "token" }, "Token"), token, msg,
      h("button", { type: "submit" }, "Sign in with token"),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      msg.textContent = "";
      try {
        const r = await fetch("/auth/token", {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify({ token: token.value.trim(), return: next }),
        });
        token.value = "";
        if (!r.ok) {
          let text = "";
          try { const j = await r.json() as { message?: string; error?: string }; text = j.message ?? j.error ?? ""; } catch { text = ""; }
          msg.textContent = text || (r.status === 401 || r.status === 403 ? "That token is not valid here. Check it with the control plane's operator." : `Sign-in failed (HTTP ${r.status}); try again.`);
          return;
        }
        refreshWho();
        await renderHeader();
        navigate(next);
      } catch (err) {
        showError(err);
      }
    });
    parts.push(form);
  }
  if (!w.known) parts.push(h("p", { class: "muted" }, "This control plane does not say how to sign in; use the rbook CLI with RBOOK_TOKEN."));
  replace(p.main, ...parts);
  ready(p.main);
}
