// Deploying a source: a published component or pasted code, then its props as a form.

import { api, el, main, say } from "./lib.js";
import { propInput } from "./props.js";
import { registry } from "./registry.js";

function showForm(formArea, component) {
  const inputs = component.configurable_props.map((p) => ({ prop: p, ...propInput(p, component.id) }));
  const name = el("input", { type: "text", id: "source-name", placeholder: component.name });
  formArea.replaceChildren(el("form", { onsubmit: async (e) => {
    e.preventDefault();
    const configured = {};
    try {
      for (const i of inputs) { const v = i.read(); if (v !== undefined) configured[i.prop.name] = v; }
    } catch { say("A JSON field is not valid JSON.", true); return; }
    try {
      const source = (await api("/sources", { method: "POST", body: { component_id: component.id, name: name.value || undefined, configured_props: configured } })).data;
      say(`Deployed ${source.name}.`);
      location.hash = `#/sources/${source.id}`;
    } catch (err) { say(err.message, true); }
  } },
  el("h3", {}, `Configure ${component.name}`),
  component.description ? el("p", { class: "description", id: "component-description" }, component.description) : null,
  el("label", { for: "source-name" }, "Source name ", el("span", { class: "hint" }, "optional")), name,
  inputs.map((i) => i.node),
  el("div", { class: "row" }, el("button", { class: "primary", type: "submit" }, "Deploy"))));
  formArea.querySelector("input, select, textarea")?.focus();
}

export async function deployPage(key) {
  const sources = (await registry()).filter((c) => c.type !== "action");
  const picker = el("select", { id: "registry-component" }, el("option", { value: "" }, "Choose a published component…"),
    sources.map((c) => el("option", { value: c.key, selected: c.key === key }, `${c.name} (${c.key})`)));
  const code = el("textarea", { id: "component-code", placeholder: "export default { name: …, props: {…}, run(event) {…} }" });
  const formArea = el("section", { id: "props-form" });
  const useRegistry = async () => {
    if (!picker.value) return;
    try { showForm(formArea, (await api(`/components/registry/${picker.value}`)).data); } catch (e) { say(e.message, true); }
  };
  main.replaceChildren(el("h2", {}, "Deploy a source"),
    el("label", { for: "registry-component" }, "From the registry ", el("span", { class: "hint" }, el("a", { href: "#/registry" }, "browse it"))),
    el("div", { class: "row" }, picker, el("button", { type: "button", id: "use-registry", onclick: useRegistry }, "Use it")),
    el("label", { for: "component-code" }, "…or paste component code"), code,
    el("div", { class: "row" }, el("button", { type: "button", id: "use-code", onclick: async () => {
      try { showForm(formArea, (await api("/components", { method: "POST", body: { component_code: code.value } })).data); } catch (e) { say(e.message, true); }
    } }, "Load its props")),
    formArea);
  if (key) await useRegistry();
}
