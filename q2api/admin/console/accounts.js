// The Accounts panel: one table row per account, built once and updated in place on every refresh
// (so nothing flickers and a focused switch or button keeps its focus), plus the row actions.

import { admin } from "./api.js";
import { confirmAction, askText } from "./dialogs.js";
import {
  $, el, setText, setAttr, show, toast, formatNumber, formatRelative, formatDate, formatTime,
} from "./dom.js";

const METHODS = { idc: "AWS Builder ID / IdC", social: "Kiro social login", api_key: "Kiro API key" };
const HEALTH_TEXT = {
  ready: "Ready",
  throttled: "Throttled",
  quota_exhausted: "Out of credits",
  access_denied: "Access denied",
  failing: "Failing",
  needs_login: "Needs a new login",
  disabled: "Disabled",
};
const HEALTH_REASON = {
  throttled: "Amazon Q asked it to slow down",
  quota_exhausted: "its credits or quota are used up",
  access_denied: "Amazon Q refused it access",
  failing: "resting after repeated failures",
  needs_login: "its refresh token no longer works",
  disabled: "serves no request until enabled",
};

const rows = new Map(); // account id → {row, cells, account}
let lastAnswer = [];

export async function refreshAccounts() {
  const { accounts } = await admin("GET", "/accounts");
  lastAnswer = accounts;
  render(accounts);
  setText($("accounts-updated"), `Updated ${formatTime(new Date().toISOString())}`);
  return accounts;
}

/** Re-render the last answer (relative times move on between refreshes). */
export function rerenderAccounts() {
  render(lastAnswer);
}

export function highlightAccount(id) {
  const entry = rows.get(id);
  if (!entry) return;
  entry.row.classList.add("fresh");
  entry.row.scrollIntoView({ block: "nearest", behavior: "smooth" });
  setTimeout(() => entry.row.classList.remove("fresh"), 4000);
}

function render(accounts) {
  const body = $("accounts-rows");
  const seen = new Set();
  accounts.forEach((account, index) => {
    seen.add(account.id);
    let entry = rows.get(account.id);
    if (!entry) {
      entry = buildRow(account.id);
      rows.set(account.id, entry);
    }
    updateRow(entry, account);
    if (body.children[index] !== entry.row) body.insertBefore(entry.row, body.children[index] ?? null);
  });
  for (const [id, entry] of rows) {
    if (!seen.has(id)) {
      entry.row.remove();
      rows.delete(id);
    }
  }
  show($("accounts-empty"), accounts.length === 0);
  show($("accounts-table"), accounts.length > 0);
}

function buildRow(id) {
  const c = {
    label: el("strong", { className: "account-label" }),
    method: el("span", { className: "muted small" }),
    badge: el("span", { className: "badge" }),
    reason: el("span", { className: "muted small" }),
    enabled: el("input", { type: "checkbox", role: "switch", className: "switch" }),
    enabledText: el("span", { className: "switch-text" }),
    expiry: el("span"),
    creditsText: el("span", { className: "nowrap" }),
    creditsBar: el("progress", { className: "credits", max: "1", value: "0" }),
    creditsReset: el("span", { className: "muted small" }),
    requests: el("span"),
    failures: el("span", { className: "muted small" }),
    lastError: el("span", { className: "last-error small" }),
  };
  const entry = { row: null, cells: c, account: null };
  const refresh = el("button", { type: "button", className: "button small" }, "Refresh");
  const rename = el("button", { type: "button", className: "button small" }, "Rename");
  const remove = el("button", { type: "button", className: "button small danger" }, "Remove");
  refresh.addEventListener("click", () => refreshToken(entry, refresh));
  rename.addEventListener("click", () => renameAccount(entry));
  remove.addEventListener("click", () => removeAccount(entry));
  c.enabled.addEventListener("change", () => toggle(entry));
  c.actions = { refresh, rename, remove };
  const stack = (...children) => el("div", { className: "cell-stack" }, ...children);
  entry.row = el(
    "tr",
    { dataset: { accountId: id } },
    cell("Account", "", stack(c.label, c.method)),
    cell("Health", "", stack(c.badge, c.reason)),
    cell("Enabled", "nowrap", el("label", { className: "switch-label" }, c.enabled, c.enabledText)),
    cell("Token expires", "nowrap", c.expiry),
    // The plan and reset date wrap: unbroken, they pushed the actions out of a 1280 px window.
    cell("Credits", "credits-cell", stack(c.creditsText, c.creditsBar, c.creditsReset)),
    cell("Requests", "nowrap", stack(c.requests, c.failures)),
    cell("Last error", "", c.lastError),
    // The buttons wrap onto a second line rather than leave the window when the table is tight.
    cell("Actions", "actions", el("div", { className: "action-buttons" }, refresh, rename, remove)),
  );
  return entry;
}

/** A cell; `label` names it in the narrow layout, where each row becomes a card. */
function cell(label, className, ...children) {
  return el("td", { className, dataset: { label } }, ...children);
}

function updateRow(entry, account) {
  const c = entry.cells;
  entry.account = account;
  setText(c.label, account.label);
  const method = [METHODS[account.auth_method] ?? account.auth_method, account.region];
  if (account.proxy) method.push(`via ${account.proxy}`);
  setText(c.method, method.filter(Boolean).join(" · "));
  // The profile ARN is not a secret (it names the profile, it opens nothing): shown on hover.
  setAttr(c.method, "title", account.profile_arn ? `profile ${account.profile_arn}` : "no Amazon Q profile");

  setText(c.badge, HEALTH_TEXT[account.health] ?? account.health);
  setAttr(c.badge, "data-health", account.health);
  setText(c.reason, healthReason(account));

  if (!entry.pending) c.enabled.checked = account.enabled;
  setAttr(c.enabled, "aria-label", `${account.label} enabled`);
  setText(c.enabledText, account.enabled ? "On" : "Off");

  setText(c.expiry, account.token_expires_at ? formatRelative(account.token_expires_at) : "not fetched yet");
  setAttr(c.expiry, "class", account.token_expires_at ? "" : "muted");
  setAttr(c.expiry, "title", account.token_expires_at ? formatDate(account.token_expires_at) : null);

  const usage = account.usage;
  const known = usage && usage.limit !== null && usage.limit !== undefined;
  setText(c.creditsText, known ? `${formatNumber(usage.used)} / ${formatNumber(usage.limit)}` : "not reported");
  setAttr(c.creditsText, "class", known ? "" : "muted");
  show(c.creditsBar, Boolean(known && usage.limit > 0));
  if (known && usage.limit > 0) {
    c.creditsBar.max = usage.limit;
    c.creditsBar.value = Math.min(usage.used ?? 0, usage.limit);
    setAttr(c.creditsBar, "aria-label", `${account.label} credits used`);
  }
  const resets = usage?.resets_at ? `resets ${formatDate(usage.resets_at)}` : "";
  setText(c.creditsReset, [usage?.subscription, resets].filter(Boolean).join(" · "));

  const stats = account.stats ?? {};
  setText(c.requests, plural(stats.requests ?? 0, "request"));
  setText(c.failures, `${formatNumber(stats.failures ?? 0)} failed`);
  setText(c.lastError, stats.last_error ?? "—");
  setAttr(c.lastError, "title", stats.last_error ?? null);

  for (const [name, button] of Object.entries(c.actions)) {
    setAttr(button, "aria-label", `${name[0].toUpperCase()}${name.slice(1)} ${account.label}`);
  }
}

function plural(count, noun) {
  return `${formatNumber(count)} ${noun}${count === 1 ? "" : "s"}`;
}

function healthReason(account) {
  const parts = [];
  const reason = account.status_detail || HEALTH_REASON[account.health];
  if (reason && account.health !== "ready") parts.push(reason);
  if (account.health_until) parts.push(`until ${formatTime(account.health_until)} (${formatRelative(account.health_until)})`);
  return parts.join(" · ");
}

// -- actions ---------------------------------------------------------------------------------------

async function toggle(entry) {
  const { account, cells } = entry;
  const enabled = cells.enabled.checked;
  entry.pending = true;
  cells.enabled.disabled = true;
  try {
    updateRow(entry, await admin("PATCH", `/accounts/${encodeURIComponent(account.id)}`, { enabled }));
    toast(`${account.label} is ${enabled ? "enabled" : "disabled"}.`);
  } catch (error) {
    cells.enabled.checked = !enabled;
    toast(`Could not ${enabled ? "enable" : "disable"} ${account.label}: ${error.message}`, "error");
  } finally {
    entry.pending = false;
    cells.enabled.disabled = false;
  }
}

async function refreshToken(entry, button) {
  const { account } = entry;
  button.disabled = true;
  setText(button, "Refreshing…");
  try {
    const answer = await admin("POST", `/accounts/${encodeURIComponent(account.id)}/refresh`);
    toast(`${account.label}: new access token, expires ${formatRelative(answer.token_expires_at)}.`);
    await refreshAccounts();
  } catch (error) {
    toast(`${account.label}: ${error.message}`, "error");
  } finally {
    button.disabled = false;
    setText(button, "Refresh");
  }
}

async function renameAccount(entry) {
  const { account } = entry;
  const label = await askText(`Rename ${account.label}`, account.label);
  if (label === null || label.trim() === account.label) return;
  try {
    updateRow(entry, await admin("PATCH", `/accounts/${encodeURIComponent(account.id)}`, { label: label.trim() }));
    toast(`Renamed to ${label.trim()}.`);
  } catch (error) {
    toast(`Could not rename ${account.label}: ${error.message}`, "error");
  }
}

async function removeAccount(entry) {
  const { account } = entry;
  const confirmed = await confirmAction(
    `Remove ${account.label}?`,
    "It stops serving at once and its stored tokens are deleted. This cannot be undone.",
    "Remove",
  );
  if (!confirmed) return;
  try {
    await admin("DELETE", `/accounts/${encodeURIComponent(account.id)}`);
    toast(`${account.label} was removed.`);
    await refreshAccounts();
  } catch (error) {
    toast(`Could not remove ${account.label}: ${error.message}`, "error");
  }
}

/** The "Add by refresh token or API key" form. */
export function wireAddForm() {
  const form = $("add-form");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    const body = { label: data.label.trim() };
    for (const name of ["refresh_token", "api_key", "client_id", "client_secret", "region", "proxy"]) {
      if (data[name]?.trim()) body[name] = data[name].trim();
    }
    const submit = form.querySelector("button[type=submit]");
    submit.disabled = true;
    setText(submit, "Checking the token…");
    try {
      const account = await admin("POST", "/accounts", body);
      form.reset();
      toast(`${account.label} was added.`);
      await refreshAccounts();
      highlightAccount(account.id);
    } catch (error) {
      toast(`Not added: ${error.message}`, "error");
    } finally {
      submit.disabled = false;
      setText(submit, "Add account");
    }
  });
}
