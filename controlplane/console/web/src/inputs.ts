// inputs.ts: a gate's approver-input form on the gate page (docs/approver-inputs.md, "The
// console"): one labelled control per declared field — a select for enum fields, a checkbox
// for booleans, a number or text box otherwise — with its description, a required marker, and
// an error line the server's refusal fills in. The server validates the values; the page only
// collects them and shows which field it refused.
import { h, dl } from "./dom.js";
import type { Approval } from "../../../../clients/ts/gen/rbook/v1/approval_pb.js";
import type { InputField } from "../../../../clients/ts/gen/rbook/v1/inputs_pb.js";

/** A rendered form: its element, the values to send, and how to show a refusal. */
export interface InputsForm {
  el: HTMLElement | null;
  values(): Record<string, string>;
  /** showError marks the field a refusal names ("input <name>: …"); false when it names none. */
  showError(message: string): boolean;
  clear(): void;
}

/** refusedField is the field an Approve refusal names: "input <name>: …" in its message. */
export function refusedField(message: string): string {
  const m = /\binput ([a-z][a-z0-9_]{0,63}): /.exec(message);
  return m ? m[1] : "";
}

function control(f: InputField, id: string, describedBy: string): HTMLInputElement | HTMLSelectElement {
  const common = { id, name: f.name, "aria-describedby": describedBy, "aria-required": f.required ? "true" : null };
  switch (f.type) {
    case "enum": {
      const sel = h("select", common,
        f.required && !f.hasDefault ? h("option", { value: "" }, "— choose —") : !f.required ? h("option", { value: "" }, "(none)") : null,
        f.options.map((o) => h("option", { value: o }, o)));
      if (f.hasDefault) sel.value = f.defaultValue;
      return sel;
    }
    case "boolean": {
      const box = h("input", { ...common, type: "checkbox" });
      box.checked = f.hasDefault && f.defaultValue === "true";
      return box;
    }
    case "number":
      return h("input", { ...common, type: "number", step: "any", value: f.hasDefault ? f.defaultValue : null });
    default:
      return h("input", { ...common, type: "text", maxlength: 4096, value: f.hasDefault ? f.defaultValue : null,
        placeholder: f.pattern ? `matching ${f.pattern}` : null });
  }
}

/** inputsForm renders a's form; el is null when the gate declares no inputs. */
export function inputsForm(a: Approval): InputsForm {
  const fields = a.inputs;
  const controls = new Map<string, HTMLInputElement | HTMLSelectElement>();
  const errors = new Map<string, HTMLElement>();
  if (!fields.length) return { el: null, values: () => ({}), showError: () => false, clear: () => undefined };
  const rows = fields.map((f) => {
    const id = `input-${f.name}`;
    const help = h("p", { id: `${id}-help`, class: "muted" }, f.description || "");
    const err = h("p", { id: `${id}-error`, class: "field-error" });
    const c = control(f, id, `${id}-help ${id}-error`);
    controls.set(f.name, c);
    errors.set(f.name, err);
    const label = h("label", { for: id }, f.name, f.required ? h("span", { class: "required", title: "required" }, " *") : null);
    return f.type === "boolean"
      ? h("div", { class: "input-field" }, c, " ", label, help, err)
      : h("div", { class: "input-field" }, label, help, c, err);
  });
  const el = h("fieldset", { id: "inputs" }, h("legend", null, "Inputs"),
    h("p", { class: "muted" }, "Sent with an approval; fields marked * are required."), rows);
  const clear = (): void => {
    for (const [name, e] of errors) {
      e.textContent = "";
      controls.get(name)?.removeAttribute("aria-invalid");
    }
  };
  return {
    el,
    clear,
    values(): Record<string, string> {
      const out: Record<string, string> = {};
      for (const f of fields) {
        const c = controls.get(f.name)!;
        const v = c instanceof HTMLInputElement && c.type === "checkbox" ? String(c.checked) : c.value.trim();
        if (v !== "") out[f.name] = v;
      }
      return out;
    },
    showError(message: string): boolean {
      const name = refusedField(message);
      const e = errors.get(name);
      if (!e) return false;
      const text = message.slice(message.indexOf(`input ${name}: `) + `input ${name}: `.length);
      e.textContent = text.split("; nothing was decided")[0];
      const c = controls.get(name)!;
      c.setAttribute("aria-invalid", "true");
      c.focus();
      return true;
    },
  };
}

/** inputValuesList shows the values a gate was approved with; null when it has none. */
export function inputValuesList(a: Approval): HTMLElement | null {
  const names = Object.keys(a.inputValues).sort();
  if (!names.length) return null;
  return h("section", { id: "input-values", "aria-labelledby": "input-values-h" },
    h("h3", { id: "input-values-h" }, "Inputs given"),
    dl("input-values-list", names.map((n) => [n, a.inputValues[n] === "" ? "(none)" : h("code", null, a.inputValues[n])] as [string, HTMLElement | string])));
}
