// The Usage panel: credits and requests per hour (24 h) or per day (7 d, 30 d), stacked by key or by
// model, drawn with uPlot (vendored in ./vendor/uplot, MIT); the totals, error rate, TTFT percentiles,
// and the top keys and models. Everything comes from /admin/api/usage/overview (the usage ledger).

import uPlot from "./vendor/uplot/uPlot.esm.js";
import { admin } from "./api.js";
import { $, el, formatMs, formatNumber, setText } from "./dom.js";

// Colour-blind-safe (Okabe–Ito) for the first eight stacks, then repeating.
const COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"];
const state = { range: "7d", stack: "key" };
// Ticks on whole buckets only: a day chart never labels noon.
const HOUR_STEPS = [3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600];
const DAY_STEPS = [86400, 2 * 86400, 7 * 86400];

/** The canvas is not styled by CSS: its axes take the theme's colours from the style sheet's variables. */
function axisColours() {
  const style = getComputedStyle(document.documentElement);
  const text = style.getPropertyValue("--muted").trim() || "#5d6673";
  const line = style.getPropertyValue("--border").trim() || "#d9dee5";
  return { stroke: text, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
}
const charts = {};

export function wireUsage(refresh) {
  for (const [groupId, field] of [["usage-range", "range"], ["usage-stack", "stack"]]) {
    for (const button of $(groupId).querySelectorAll("button")) {
      button.addEventListener("click", () => {
        state[field] = button.dataset[field];
        for (const other of $(groupId).querySelectorAll("button")) other.setAttribute("aria-pressed", String(other === button));
        refresh();
      });
    }
  }
  window.addEventListener("resize", () => {
    for (const chart of Object.values(charts)) chart.setSize(size(chart.root.parentElement));
  });
}

export async function refreshUsage() {
  const overview = await admin("GET", `/usage/overview?range=${state.range}&stack=${state.stack}`);
  setText($("usage-requests"), formatNumber(overview.requests));
  setText($("usage-credits"), overview.credits.toFixed(2));
  setText($("usage-errors"), `${(overview.error_rate * 100).toFixed(1)} %`);
  setText($("usage-ttft"), `${formatMs(overview.ttft_p50_ms)} / ${formatMs(overview.ttft_p95_ms)}`);
  draw("credits", overview, (stack) => stack.credits, 2);
  draw("requests", overview, (stack) => stack.requests, 0);
  fillTop("usage-top-keys", overview.top_keys, "key");
  fillTop("usage-top-models", overview.top_models, "model");
}

function size(container) {
  const width = Math.max(container.clientWidth, 260);
  return { width, height: width < 500 ? 200 : 260 };
}

/** Bars stacked: each series is drawn as the running sum of itself and those below it, tallest first. */
function draw(name, overview, valuesOf, decimals) {
  const container = $(`usage-${name}-chart`);
  const xs = overview.buckets.map((label) => Date.parse(overview.bucket === "hour" ? label : `${label}T00:00:00Z`) / 1000);
  const running = new Array(xs.length).fill(0);
  const stacked = overview.stacks.map((stack) => {
    const own = valuesOf(stack);
    return own.map((value, index) => (running[index] += value));
  });
  const order = overview.stacks.map((_, index) => index).reverse(); // the top of the stack is drawn first
  const bars = uPlot.paths.bars({ size: [0.7, 40] });
  const step = overview.bucket === "hour" ? 3600 : 86400;
  const options = {
    legend: { show: true },
    cursor: { points: { show: false } },
    // Half a bucket of room at each end, so the first and last bars are drawn whole.
    scales: { x: { time: true, range: () => [xs[0] - step / 2, xs[xs.length - 1] + step / 2] }, y: { range: (_u, _min, max) => [0, Math.max(max, decimals ? 0.01 : 1) * 1.1] } },
    axes: [
      { ...axisColours(), incrs: overview.bucket === "hour" ? HOUR_STEPS : DAY_STEPS },
      { ...axisColours(), values: (_u, ticks) => ticks.map((tick) => tick.toFixed(decimals)) },
    ],
    series: [
      {},
      ...order.map((index) => ({
        label: overview.stacks[index].name,
        fill: COLOURS[index % COLOURS.length],
        stroke: COLOURS[index % COLOURS.length],
        paths: bars,
        points: { show: false },
        value: (_u, _v, _s, at) => (at === null ? "—" : valuesOf(overview.stacks[index])[at].toFixed(decimals)),
      })),
    ],
  };
  const data = [xs, ...order.map((index) => stacked[index])];
  charts[name]?.destroy();
  container.replaceChildren(); // measured empty: the old chart's width must not decide the new one's
  if (!overview.stacks.length) {
    container.append(el("p", { className: "empty" }, "No requests in this period."));
    delete charts[name];
    return;
  }
  charts[name] = new uPlot({ ...options, ...size(container) }, data, container);
}

function fillTop(bodyId, rows, field) {
  $(bodyId).replaceChildren(
    ...rows.map((row) =>
      el(
        "tr",
        {},
        el("td", {}, row[field]),
        el("td", { className: "num" }, formatNumber(row.requests)),
        el("td", { className: "num" }, formatNumber(row.errors)),
        el("td", { className: "num" }, row.credits.toFixed(2)),
      ),
    ),
  );
}
