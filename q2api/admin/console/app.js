// The console's entry point: sign-in, the section tabs, and the refresh loop of the visible panel.

import { ApiError, admin, session, whenUnauthorized } from "./api.js";
import { refreshAccounts, rerenderAccounts, wireAddForm } from "./accounts.js";
import { refreshActivity } from "./activity.js";
import { refreshCaptures } from "./captures.js";
import { refreshKeys, wireKeyForm } from "./keys.js";
import { refreshUsage, wireUsage } from "./usage.js";
import { $, setText, show, toast } from "./dom.js";
import { wireLoginForm } from "./login.js";
import { refreshModels } from "./models.js";
import { prepareTryIt, wireTryIt } from "./tryit.js";

const REFRESH_MS = { accounts: 4000, keys: 5000, usage: 10000, activity: 3000, captures: 5000 };
const PANELS = {
  accounts: refreshAccounts,
  models: refreshModels,
  try: prepareTryIt,
  keys: refreshKeys,
  usage: refreshUsage,
  activity: refreshActivity,
  captures: refreshCaptures,
};

let current = "accounts";
let timer = null;

function signedIn(visible) {
  show($("sign-in"), !visible);
  show($("tabs"), visible);
  show($("sign-out"), visible);
  for (const name of Object.keys(PANELS)) show($(`panel-${name}`), visible && name === current);
}

async function signIn(event) {
  event.preventDefault();
  const input = $("admin-key");
  const key = input.value.trim();
  const error = $("sign-in-error");
  show(error, false);
  try {
    await admin("GET", "/accounts", undefined, key);
  } catch (failure) {
    setText(
      error,
      failure instanceof ApiError && failure.status === 401
        ? "That admin key was refused. Check Q2API_ADMIN_KEY on the gateway and try again."
        : failure.message,
    );
    show(error, true);
    input.select();
    return;
  }
  input.value = "";
  session.save(key);
  start();
}

function signOut(message) {
  session.forget();
  clearTimeout(timer);
  $("toasts").replaceChildren(); // what happened while signed in is not for whoever sits down next
  signedIn(false);
  if (message) {
    setText($("sign-in-error"), message);
    show($("sign-in-error"), true);
  }
  $("admin-key").focus();
}

function select(name) {
  current = name;
  for (const tab of document.querySelectorAll(".tab")) {
    if (tab.dataset.panel === name) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  signedIn(true);
  refreshNow();
}

/** Load the visible panel now, then again every few seconds while the tab is visible. */
async function refreshNow() {
  clearTimeout(timer);
  const panel = current;
  try {
    await PANELS[panel]();
  } catch (error) {
    if (error.status !== 401) toast(`Could not load ${panel}: ${error.message}`, "error");
  }
  if (panel === current && REFRESH_MS[panel] && session.key()) {
    timer = setTimeout(() => (document.hidden ? null : refreshNow()), REFRESH_MS[panel]);
  }
}

function start() {
  signedIn(true);
  refreshNow();
}

function main() {
  whenUnauthorized(() => signOut("The gateway no longer accepts this admin key. Sign in again."));
  $("sign-in-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", () => {
    // A fresh page: no account rows, typed client key or conversation is left in memory.
    session.forget();
    location.reload();
  });
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => select(tab.dataset.panel));
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && session.key()) refreshNow();
  });
  // Relative times ("in 5 minutes") move on between refreshes.
  setInterval(rerenderAccounts, 30_000);
  wireAddForm();
  wireLoginForm();
  wireTryIt();
  wireKeyForm();
  wireUsage(refreshNow);
  if (session.key()) start();
  else signedIn(false);
}

main();
