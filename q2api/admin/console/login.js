// Device-code login: start it, show the link and the code, poll until the gateway stores the account.

import { admin } from "./api.js";
import { highlightAccount, refreshAccounts } from "./accounts.js";
import { $, setText, show, toast } from "./dom.js";

const POLL_MS = 1000;
const ENDINGS = {
  expired: "The code expired before it was approved. Start a new login.",
  denied: "The login was denied in the browser. Nothing was stored.",
  failed: "The login failed",
};

let polling = null; // the login being followed (a token: a tick of an abandoned login stops itself)

export function wireLoginForm() {
  const form = $("login-form");
  const method = $("login-method");
  method.addEventListener("change", () => show($("login-idc-fields"), method.value === "idc"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    const body = { label: data.label.trim(), method: data.method };
    if (data.method === "idc") {
      if (data.start_url?.trim()) body.start_url = data.start_url.trim();
      if (data.region?.trim()) body.region = data.region.trim();
    }
    const submit = $("login-start");
    submit.disabled = true;
    try {
      follow(await admin("POST", "/logins", body), body.label);
    } catch (error) {
      toast(`The login did not start: ${error.message}`, "error");
      submit.disabled = false;
    }
  });
  $("login-copy").addEventListener("click", copyCode);
  $("login-dismiss").addEventListener("click", () => {
    stopPolling();
    show($("login-progress"), false);
    show(form, true);
    $("login-start").disabled = false;
    $("login-label").focus();
  });
}

function follow(login, label) {
  const link = $("login-link");
  link.href = login.verification_uri_complete || login.verification_uri;
  setText(link, login.verification_uri);
  setText($("login-code"), login.user_code);
  const bar = $("login-bar");
  bar.max = login.expires_in;
  bar.value = login.expires_in;
  show($("login-form"), false);
  show($("login-progress"), true);
  show($("login-dismiss"), false);
  show($("login-instructions"), true);
  setText($("login-status"), "Waiting for you to approve in the browser…");
  $("login-copy").focus();

  const started = Date.now();
  const run = Symbol(login.login_id);
  polling = run;
  const tick = async () => {
    if (polling !== run) return; // dismissed, or another login started
    const elapsed = (Date.now() - started) / 1000;
    bar.value = Math.max(login.expires_in - elapsed, 0);
    let answer;
    try {
      answer = await admin("GET", `/logins/${encodeURIComponent(login.login_id)}`);
    } catch (error) {
      // A network blip is retried; an answer that says the login or the key is unknown ends it.
      const final = error.status === 401 || error.status === 404;
      answer = final
        ? { status: "failed", detail: error.message }
        : { status: "pending", note: `checking failed (${error.message}), trying again` };
    }
    if (polling !== run) return;
    if (answer.status === "pending") {
      setText($("login-status"), `Waiting for you to approve in the browser… ${clock(elapsed)} so far${answer.note ? `; ${answer.note}` : ""}.`);
      setTimeout(tick, POLL_MS);
      return;
    }
    polling = null;
    finish(answer, label);
  };
  setTimeout(tick, POLL_MS);
}

async function finish(answer, label) {
  // The link and the code are spent either way; what is left to say is how it ended.
  show($("login-instructions"), false);
  show($("login-dismiss"), true);
  if (answer.status === "done") {
    $("login-bar").value = $("login-bar").max;
    setText($("login-status"), `Done: ${label} is logged in and serving.`);
    toast(`${label} was added.`);
    await refreshAccounts().catch(() => {});
    if (answer.account_id) highlightAccount(answer.account_id);
    return;
  }
  const ending = ENDINGS[answer.status] ?? `The login ended: ${answer.status}`;
  setText($("login-status"), answer.detail ? `${ending}: ${answer.detail}` : ending);
  $("login-bar").value = 0;
}

function stopPolling() {
  polling = null;
}

async function copyCode() {
  const code = $("login-code").textContent;
  try {
    await navigator.clipboard.writeText(code);
    toast("Code copied.");
  } catch {
    // No clipboard (a plain-http address other than localhost): select it for Ctrl+C instead.
    const range = document.createRange();
    range.selectNodeContents($("login-code"));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    toast("Press Ctrl+C (⌘C) to copy the selected code.");
  }
}

function clock(seconds) {
  const whole = Math.floor(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}
