// Modal questions on native <dialog> elements: focus moves in and back, Escape cancels.

import { $, setText } from "./dom.js";

function ask(dialog) {
  return new Promise((resolve) => {
    dialog.returnValue = "";
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

/** Resolves to true when the user confirms. */
export async function confirmAction(title, text, okLabel) {
  const dialog = $("confirm-dialog");
  setText($("confirm-title"), title);
  setText($("confirm-text"), text);
  setText($("confirm-ok"), okLabel);
  return ask(dialog);
}

/** Resolves to the text entered, or null when cancelled. */
export async function askText(title, value) {
  const dialog = $("rename-dialog");
  const input = $("rename-input");
  setText($("rename-title"), title);
  input.value = value;
  const answer = ask(dialog);
  input.select();
  return (await answer) && input.value.trim() ? input.value : null;
}
