// Talks to the UI daemon's REST API (/api/v1, Storm's paths): the pages' only data path.
// Polling shows a banner while Nimbus (or the UI daemon) does not answer, and hides it on the
// next good answer. Actions send the cluster's secret as a bearer header when it has one.

export const API = "/api/v1";
const SECRET_KEY = "storm-py-ui-secret";

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
    response = await fetch(API + path, { headers: { Accept: "application/json" }, cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, { error: "unreachable", errorMessage: "the UI daemon does not answer" });
  }
  return answer(response);
}

export async function post(path, body) {
  const headers = { "Content-Type": "application/json" };
  const secret = sessionStorage.getItem(SECRET_KEY);
  if (secret) headers.Authorization = `Bearer ${secret}`;
  const response = await fetch(API + path, { method: "POST", headers, body: JSON.stringify(body || {}) });
  try {
    return await answer(response);
  } catch (e) {
    if (e.status === 403) sessionStorage.removeItem(SECRET_KEY); // a wrong secret is asked again
    throw e;
  }
}

export const secret = {
  known: () => sessionStorage.getItem(SECRET_KEY) !== null,
  remember: (value) => sessionStorage.setItem(SECRET_KEY, value),
};

// Whether POSTs need the secret: the configuration shows the key (masked) when it is set.
let needsSecret = null;
export async function clusterNeedsSecret() {
  if (needsSecret === null) {
    const conf = await get("/cluster/configuration");
    needsSecret = Boolean(conf["nimbus.authentication.secret"]);
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
