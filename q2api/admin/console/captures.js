// The Captures panel: the capture files of failed requests (Q2API_CAPTURE), newest first, each one
// downloadable to attach to a bug report, or removable. The files hold no secret; unless the gateway
// redacts text, they hold the conversation: read one before sharing it.

import { admin, adminFile } from "./api.js";
import { confirmAction } from "./dialogs.js";
import { $, el, setText, show, formatTime, toast } from "./dom.js";

export async function refreshCaptures() {
  const answer = await admin("GET", "/captures");
  const rows = answer.captures.map(buildRow);
  $("captures-rows").replaceChildren(...rows);
  show($("captures-empty"), rows.length === 0);
  show($("captures-table"), rows.length > 0);
  const limits = `at most ${answer.limits.count} files / ${Math.round(answer.limits.bytes / 1048576)} MiB, oldest dropped`;
  setText(
    $("captures-settings"),
    `Q2API_CAPTURE=${answer.mode}${answer.text_redacted ? ", text redacted" : ""} · ${answer.directory} · ${limits}`,
  );
}

function buildRow(capture) {
  const download = el("button", { type: "button", className: "button small" }, "Download");
  download.addEventListener("click", () => downloadCapture(capture.id));
  const remove = el("button", { type: "button", className: "button small danger" }, "Remove");
  remove.addEventListener("click", () => removeCapture(capture.id));
  const failed = capture.status >= 400;
  return el(
    "tr",
    { dataset: { captureId: capture.id } },
    el("td", { dataset: { label: "Time" }, title: capture.id }, formatTime(capture.captured_at)),
    el("td", { dataset: { label: "Request" } }, el("code", {}, capture.request_id ?? "—")),
    el("td", { dataset: { label: "Reasons" } }, (capture.reasons ?? []).join(", ") || "—"),
    el(
      "td",
      { dataset: { label: "Status" } },
      el("span", { className: "badge", dataset: { health: failed ? "failing" : "ready" } }, String(capture.status ?? "—")),
    ),
    el("td", { dataset: { label: "Amazon Q" } }, capture.upstream_status ? String(capture.upstream_status) : "—"),
    el("td", { dataset: { label: "Model" } }, capture.upstream_model && capture.upstream_model !== "-" ? el("code", {}, capture.upstream_model) : "—"),
    el("td", { className: "num", dataset: { label: "Findings" } }, String(capture.findings ?? "—")),
    el("td", { className: "num", dataset: { label: "Size" } }, `${Math.max(1, Math.round((capture.size_bytes ?? 0) / 1024))} KB`),
    el("td", { dataset: { label: "Actions" }, className: "actions" }, download, remove),
  );
}

async function downloadCapture(id) {
  try {
    const blob = await adminFile(`/captures/${encodeURIComponent(id)}`);
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: `${id}.json`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (error) {
    toast(`Could not download ${id}: ${error.message}`, "error");
  }
}

async function removeCapture(id) {
  const confirmed = await confirmAction("Remove capture?", `The capture file ${id} will be deleted.`, "Remove");
  if (!confirmed) return;
  try {
    await admin("DELETE", `/captures/${encodeURIComponent(id)}`);
    toast(`${id} was removed.`);
  } catch (error) {
    toast(`Could not remove ${id}: ${error.message}`, "error");
  }
  await refreshCaptures();
}
