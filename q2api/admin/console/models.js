// The Models panel: the catalogue the gateway serves, with context windows and input types.

import { admin } from "./api.js";
import { $, el, show, formatTokens } from "./dom.js";

let models = [];

export const currentModels = () => models;

export async function refreshModels() {
  const { data } = await admin("GET", "/models");
  models = data;
  const rows = $("models-rows");
  rows.replaceChildren(
    ...data.map((model) =>
      el(
        "tr",
        {},
        el("td", { dataset: { label: "Model" } }, el("code", {}, model.id)),
        el("td", { dataset: { label: "Name" } }, model.display_name ?? model.id),
        el("td", { className: "num", dataset: { label: "Context window" } }, formatTokens(model.max_input_tokens)),
        el("td", { className: "num", dataset: { label: "Max output" } }, formatTokens(model.max_tokens)),
        el("td", { dataset: { label: "Input" } }, inputTypes(model)),
      ),
    ),
  );
  show($("models-empty"), data.length === 0);
  show($("models-table"), data.length > 0);
  return data;
}

function inputTypes(model) {
  const image = model.capabilities?.image_input?.supported;
  if (image === undefined) return "text (images: not reported)";
  return image ? "text, images" : "text";
}
