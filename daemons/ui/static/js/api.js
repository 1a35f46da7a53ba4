// Talks to the UI daemon's REST API (/api/v1, Storm's paths): the pages' only data path.
// Polling shows a banner while Nimbus (or the UI daemon) does not answer, and hides it on the
// next good answer. Reads go with the login's session cookie (same origin); a 401 sends the
// browser to the login page. Actions send the cluster's secret as a bearer header when the page
// asked for it (a read-only login, or none).

export const API = "/api/v1";
const SECRET_KEY = "storm-py-ui-secret";
const ROLE_HEADER = "X-Storm-Py-Role";
let role = null; // what the UI daemon said our credentials are ("admin", "read-only"; null: no secret)

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.errorMessage) || `HTTP ${status}`);
    this.status = status;
    this.error = (body && body.error) || "";
  }
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = null;
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export async function get(path) {
  let response;
  try {
    response = await fetch(API + path, {
      headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin",
    });
  } catch (e) {
    throw new ApiError(0, { error: "unreachable", errorMessage: "the UI daemon does not answer" });
  }
  if (response.status === 401) toLogin();
  role = response.headers.get(ROLE_HEADER);
  if (role) showLogout(role);
  return answer(response);
}

// A secured UI: the header says who we are and offers to end the session (POST /logout).
function showLogout(who) {
  const header = document.querySelector("header.top");
  if (!header || document.getElementById("logout")) return;
  const form = document.createElement("form");
  form.method = "post";
  form.action = "/logout";
  form.id = "logout";
  const button = document.createElement("button");
  button.type = "submit";
  button.textContent = `Log out (${who})`;
  form.append(button);
  header.append(form);
}

// The session ended (expired, logged out, secrets changed): log in again, then come back here.
function toLogin() {
  const here = window.location.pathname + window.location.search;
  window.location.assign(`/login?next=${encodeURIComponent(here)}`);
}

export async function post(path, body) {
  const headers = { "Content-Type": "application/json" };
  const secret = sessionStorage.getItem(SECRET_KEY);
  if (secret) headers.Authorization = `Bearer ${secret}`;
  const response = await fetch(API + path, {
    method: "POST", headers, body: JSON.stringify(body || {}), credentials: "same-origin",
  });
  try {
    return await answer(response);
  } catch (e) {
    // A wrong secret (401) or one that may not act (403) is asked again in the dialog.
    if (e.status === 401 || e.status === 403) sessionStorage.removeItem(SECRET_KEY);
    throw e;
  }
}

export const secret = {
  known: () => sessionStorage.getItem(SECRET_KEY) !== null,
  remember: (value) => sessionStorage.setItem(SECRET_KEY, value),
};

// Whether POSTs need the secret typed in: the configuration shows the key (masked) when it is
// set, and an admin login already carries it in its session.
let needsSecret = null;
export async function clusterNeedsSecret() {
  if (needsSecret === null) {
    const conf = await get("/cluster/configuration");
    needsSecret = Boolean(conf["nimbus.authentication.secret"]) && role !== "admin";
  }
  return needsSecret;
}

function banner(message) {
  const node = document.getElementById("banner");
  if (!node) return;
  node.textContent = message || "";
  node.hidden = !message;
}

// Calls render() now and every `seconds`; a failure shows the banner and keeps polling.
export function poll(render, seconds = 5) {
  let timer = null;
  const tick = async () => {
    try {
      await render();
      banner("");
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        banner(e.message);
      } else {
        banner(`Nimbus is not answering (${e.message}); showing the last figures, retrying every ${seconds}s.`);
        if (!(e instanceof ApiError)) console.error(e); // a bug in the page, not an outage
      }
    }
    timer = setTimeout(tick, seconds * 1000);
  };
  tick();
  return { refresh: () => { clearTimeout(timer); tick(); } };
}

export function param(name) {
  return new URLSearchParams(window.location.search).get(name);
}
