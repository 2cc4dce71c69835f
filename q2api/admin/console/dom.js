// Small DOM and formatting helpers shared by the panels. No innerHTML anywhere: every value the
// gateway returns is set as text, so nothing it says can become markup.

export const $ = (id) => document.getElementById(id);

/** An element with attributes, properties (`on*` = listeners) and children (strings become text). */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "className") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

/** Set text only when it changed, so a refresh every few seconds repaints nothing that stayed the same. */
export function setText(node, text) {
  const value = text ?? "";
  if (node.textContent !== value) node.textContent = value;
}

export function setAttr(node, name, value) {
  if (value === null || value === undefined) {
    if (node.hasAttribute(name)) node.removeAttribute(name);
  } else if (node.getAttribute(name) !== String(value)) {
    node.setAttribute(name, String(value));
  }
}

export function show(node, visible) {
  if (node.hidden === visible) node.hidden = !visible;
}

const numberFormat = new Intl.NumberFormat();

export function formatNumber(value) {
  return value === null || value === undefined ? "—" : numberFormat.format(value);
}

/** 200000 → "200K", 1000000 → "1M". */
export function formatTokens(value) {
  if (!value) return "—";
  if (value >= 1_000_000 && value % 100_000 === 0) return `${value / 1_000_000}M`;
  if (value >= 1000 && value % 1000 === 0) return `${value / 1000}K`;
  return numberFormat.format(value);
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return "—";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const UNITS = [
  ["day", 86_400_000],
  ["hour", 3_600_000],
  ["minute", 60_000],
  ["second", 1000],
];

/** "in 52 minutes", "3 hours ago"; "—" for no time. */
export function formatRelative(iso, now = Date.now()) {
  if (!iso) return "—";
  const delta = Date.parse(iso) - now;
  for (const [unit, size] of UNITS) {
    if (Math.abs(delta) >= size || unit === "second") {
      return relative.format(Math.round(delta / size), unit);
    }
  }
  return "—";
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });

export function formatDate(iso) {
  return iso ? dateTime.format(new Date(iso)) : "—";
}

export function formatTime(iso) {
  return iso ? timeOnly.format(new Date(iso)) : "—";
}

/** A short message at the bottom of the screen; errors stay until dismissed, the rest for a few seconds. */
export function toast(text, kind = "info") {
  const close = el("button", { type: "button", className: "toast-close", "aria-label": "Dismiss" }, "×");
  const note = el("div", { className: `toast ${kind}` }, el("span", {}, text), close);
  close.addEventListener("click", () => note.remove());
  $("toasts").append(note);
  if (kind !== "error") setTimeout(() => note.remove(), 5000);
}
