// The Activity panel: the last requests the gateway served, newest first. Each answer comes from the
// ring of the one worker process that served the poll, so answers are merged, never replaced: a row
// stays until LIMIT newer ones push it out, and nothing flickers while the table refreshes.

import { admin } from "./api.js";
import { $, el, show, formatMs, formatNumber, formatTime } from "./dom.js";

const LIMIT = 50;
const known = new Map(); // request id → {entry, row}

export async function refreshActivity() {
  const { requests } = await admin("GET", `/activity?limit=${LIMIT}`);
  for (const entry of requests) {
    if (!known.has(entry.request_id)) known.set(entry.request_id, { entry, row: buildRow(entry) });
  }
  // ISO times of one format sort as text; the sort is stable, so one answer's order decides ties.
  const newest = [...known.values()].sort((a, b) => b.entry.time.localeCompare(a.entry.time));
  for (const { entry, row } of newest.splice(LIMIT)) {
    row.remove();
    known.delete(entry.request_id);
  }
  const body = $("activity-rows");
  newest.forEach(({ row }, index) => {
    if (body.children[index] !== row) body.insertBefore(row, body.children[index] ?? null);
  });
  show($("activity-empty"), newest.length === 0);
  show($("activity-table"), newest.length > 0);
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
    el("td", { dataset: { label: "Key" } }, entry.key ?? "—"), // a store key's label; an environment key shows —
    el(
      "td",
      { dataset: { label: "Outcome" } },
      outcome,
      entry.capture ? el("span", { className: "badge capture", title: `capture ${entry.capture}` }, "captured") : null,
    ),
  );
}
