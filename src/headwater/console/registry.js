// The registry: everything published, searched as you type (by name, key, description, type),
// and a component's page with its props in words and a way to deploy it.

import { all, api, el, render } from "./lib.js";
import { labelOf, typeName } from "./props.js";

/** Every published component, all pages of the listing. */
export const registry = () => all("/components/registry");

const matches = (c, words) => {
  const text = `${c.name} ${c.key} ${c.description || ""} ${c.type || ""}`.toLowerCase();
  return words.every((w) => text.includes(w));
};

export async function registryPage() {
  const components = await registry();
  const search = el("input", { type: "search", id: "registry-search", placeholder: "http, schedule, rss…", autocomplete: "off" });
  const count = el("p", { class: "hint", id: "registry-count", "aria-live": "polite" });
  const list = el("ul", { class: "cards", id: "registry-list", "aria-label": "Published components" });
  const show = () => {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    const found = components.filter((c) => matches(c, words));
    count.textContent = `${found.length} of ${components.length} published components`;
    list.replaceChildren(...found.map((c) => el("li", {},
      el("a", { href: `#/registry/${encodeURIComponent(c.key)}` }, c.name), " ",
      el("span", { class: "badge" }, c.type || "source"), " ", el("code", {}, c.key),
      c.description ? el("div", { class: "hint" }, c.description) : null)));
  };
  search.addEventListener("input", show);
  show();
  render(el("h2", {}, "Registry"),
    el("label", { for: "registry-search" }, "Search published components"), search, count, list);
  search.focus();
}

export async function registryComponentPage(key) {
  const c = (await api(`/components/registry/${encodeURIComponent(key)}`)).data;
  const props = c.configurable_props.filter((p) => p.type !== "$.service.db");
  render(
    el("h2", {}, c.name, " ", el("span", { class: "badge" }, c.type || "source")),
    el("p", { class: "meta" }, el("code", {}, c.key), ` · version ${c.version}`),
    c.description ? el("p", { id: "component-description" }, c.description) : null,
    el("h3", {}, "Props"),
    props.length ? el("table", { class: "config" }, el("tbody", {}, props.map((p) => el("tr", {},
      el("th", { scope: "row" }, labelOf(p)),
      el("td", {}, typeName(p.type), p.optional ? ", optional" : "", p.description ? el("div", { class: "hint" }, p.description) : null)))))
      : el("p", { class: "hint" }, "None."),
    c.type === "action" ? el("p", { class: "hint" }, "An action: use it as a step of a workflow.")
      : el("p", {}, el("a", { href: `#/deploy/${encodeURIComponent(c.key)}`, class: "button primary" }, "Deploy it")),
    el("details", {}, el("summary", {}, "Code"), el("pre", { class: "json" }, c.code)));
}
