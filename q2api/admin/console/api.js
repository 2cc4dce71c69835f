// The admin API client. The admin key lives in this tab's sessionStorage (gone when the tab closes)
// and travels only in the Authorization header: never in a URL, a cookie or local storage.

const KEY_NAME = "q2api.adminKey";

export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export const session = {
  key: () => sessionStorage.getItem(KEY_NAME),
  save: (key) => sessionStorage.setItem(KEY_NAME, key),
  forget: () => sessionStorage.removeItem(KEY_NAME),
};

let onUnauthorized = () => {};

/** What to do when the gateway refuses the stored key (it changed, or the gateway restarted with another). */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/** Call `/admin/api{path}`; resolves to the JSON answer (null for 204), rejects with ApiError. */
export async function admin(method, path, body, key = session.key()) {
  let response;
  try {
    response = await fetch(`/admin/api${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${key ?? ""}`,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    throw new ApiError(0, "unreachable", "The gateway did not answer. Is it still running?");
  }
  if (response.status === 204) return null;
  const answer = await response.json().catch(() => null);
  if (response.ok) return answer;
  const error = answer?.error ?? {};
  const failure = new ApiError(response.status, error.type ?? "error", error.message ?? `HTTP ${response.status}`);
  if (response.status === 401 && key === session.key()) onUnauthorized(failure);
  throw failure;
}

/** Fetch a file from `/admin/api{path}` as a Blob (a capture download), with the same key and errors. */
export async function adminFile(path, key = session.key()) {
  let response;
  try {
    response = await fetch(`/admin/api${path}`, {
      headers: { Authorization: `Bearer ${key ?? ""}` },
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    throw new ApiError(0, "unreachable", "The gateway did not answer. Is it still running?");
  }
  if (response.ok) return response.blob();
  const error = (await response.json().catch(() => null))?.error ?? {};
  const failure = new ApiError(response.status, error.type ?? "error", error.message ?? `HTTP ${response.status}`);
  if (response.status === 401 && key === session.key()) onUnauthorized(failure);
  throw failure;
}
