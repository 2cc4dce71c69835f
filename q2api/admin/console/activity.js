// The Activity panel: the last requests the gateway served. Rows are keyed by request id: new ones
// are added on top and the rest stay as they are, so the table does not flicker while it refreshes.

import { admin } from "./api.js";
import { $, el, show, formatMs, formatNumber, formatTime } from "./dom.js";

const LIMIT = 50;
const rows = new Map(); // request id → row

export async function refreshActivity() {
  const { requests } = await admin("GET", `/activity?limit=${LIMIT}`);
  const body = $("activity-rows");
  const wanted = new Set(requests.map((entry) => entry.request_id));
  for (const [id, row] of rows) {
    if (!wanted.has(id)) {
      row.remove();
      rows.delete(id);
    }
  }
  requests.forEach((entry, index) => {
    let row = rows.get(entry.request_id);
    if (!row) {
      row = buildRow(entry);
      rows.set(entry.request_id, row);
    }
    if (body.children[index] !== row) body.insertBefore(row, body.children[index] ?? null);
  });
  show($("activity-empty"), requests.length === 0);
  show($("activity-table"), requests.length > 0);
  return requests;
}

function buildRow(entry) {
  const ok = entry.status < 400 && !entry.error;
  const outcome = entry.error ?? entry.stop_reason ?? "—";
  return el(
    "tr",
    { dataset: { requestId: entry.request_id } },
    el("td", { dataset: { label: "Time" }, title: entry.request_id }, formatTime(entry.time)),
    el("td", { dataset: { label: "Model" } }, entry.model === "-" ? "—" : el("code", {}, entry.model)),
    el(
      "td",
      { dataset: { label: "Status" } },
      el("span", { className: "badge", dataset: { health: ok ? "ready" : "failing" } }, String(entry.status)),
    ),
    el("td", { className: "num", dataset: { label: "TTFT" } }, formatMs(entry.ttft_ms)),
    el("td", { className: "num", dataset: { label: "Duration" } }, formatMs(entry.duration_ms)),
    el(
      "td",
      { className: "num", dataset: { label: "Tokens in / out" } },
      `${formatNumber(entry.input_tokens)} / ${formatNumber(entry.output_tokens)}`,
    ),
    el("td", { dataset: { label: "Account" } }, entry.account === "-" ? "—" : entry.account),
    el("td", { dataset: { label: "Outcome" } }, outcome),
  );
}
