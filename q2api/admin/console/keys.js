// The Keys panel: client keys kept in the store, each with its limits and what it spent today and
// this month against its budgets; a form to create one (its key shown once) and a revoke button.

import { admin } from "./api.js";
import { confirmAction } from "./dialogs.js";
import { $, el, formatDate, setText, show, toast } from "./dom.js";

const NUMBERS = ["rpm", "tpm", "max_concurrent", "credits_per_day", "credits_per_month"];

export async function refreshKeys() {
  const { keys } = await admin("GET", "/keys");
  $("keys-rows").replaceChildren(...keys.map(buildRow));
  show($("keys-empty"), keys.length === 0);
  show($("keys-table"), keys.length > 0);
}

function credits(value) {
  return value === null || value === undefined ? "—" : value.toFixed(2);
}

/** Spend against a budget: "0.42 / 5" with a meter, or just the spend when there is no budget. */
function spend(spent, budget, label) {
  if (budget === null || budget === undefined) return el("span", {}, credits(spent), el("span", { className: "hint" }, " (no budget)"));
  const used = spent ?? 0;
  return el(
    "span",
    { className: "spend" },
    el("meter", { min: "0", max: String(budget), value: String(Math.min(used, budget)), high: String(budget * 0.8),
      optimum: "0", "aria-label": `${label}: ${credits(used)} of ${budget} credits` }),
    ` ${credits(used)} / ${budget}`,
  );
}

function rates(key) {
  const parts = [];
  if (key.rpm) parts.push(`${key.rpm} req/min`);
  if (key.tpm) parts.push(`${key.tpm} tok/min`);
  if (key.max_concurrent) parts.push(`${key.max_concurrent} in flight`);
  return parts.length ? parts.join(" · ") : "—";
}

function buildRow(key) {
  const revoke = el("button", { type: "button", className: "button quiet danger", onclick: () => revokeKey(key) }, "Revoke");
  return el(
    "tr",
    { dataset: { keyId: key.id } },
    el("td", { dataset: { label: "Key" } }, el("strong", {}, key.label), el("div", { className: "hint" }, el("code", {}, `${key.key_prefix}…`))),
    el(
      "td",
      { dataset: { label: "Status" } },
      el("span", { className: "badge", dataset: { health: key.status === "active" ? "ready" : "failing" } }, key.status),
    ),
    el("td", { dataset: { label: "Models" } }, key.models ? key.models.join(", ") : "every model"),
    el("td", { dataset: { label: "Rates" } }, rates(key)),
    el("td", { dataset: { label: "Spent today" } }, spend(key.credits_today, key.credits_per_day, "today")),
    el("td", { dataset: { label: "Spent this month" } }, spend(key.credits_this_month, key.credits_per_month, "this month")),
    el("td", { dataset: { label: "Expires" } }, key.expires_at ? formatDate(key.expires_at) : "never"),
    el("td", { className: "actions" }, key.status === "revoked" ? null : revoke),
  );
}

async function revokeKey(key) {
  const sure = await confirmAction(
    `Revoke ${key.label}?`,
    "Requests with this key are refused within seconds, on every worker and replica. This cannot be undone.",
    "Revoke",
  );
  if (!sure) return;
  try {
    await admin("DELETE", `/keys/${encodeURIComponent(key.id)}`);
    toast(`${key.label} was revoked.`);
  } catch (error) {
    toast(`Not revoked: ${error.message}`, "error");
  }
  await refreshKeys();
}

export function wireKeyForm() {
  const form = $("key-form");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    const body = { label: data.label.trim() };
    const models = data.models.split(",").map((name) => name.trim()).filter(Boolean);
    if (models.length) body.models = models;
    if (data.expires.trim()) body.expires = data.expires.trim();
    for (const name of NUMBERS) {
      if (data[name] !== "") body[name] = Number(data[name]);
    }
    try {
      const created = await admin("POST", "/keys", body);
      form.reset();
      setText($("key-created-label"), created.label);
      setText($("key-created-value"), created.key);
      show($("key-created"), true);
      await refreshKeys();
    } catch (error) {
      toast(`Not created: ${error.message}`, "error");
    }
  });
  $("key-created-done").addEventListener("click", () => {
    setText($("key-created-value"), ""); // gone from the page once copied
    show($("key-created"), false);
  });
}
