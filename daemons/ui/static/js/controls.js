// The window and sys selectors of the topology and component pages: set from the URL, kept in
// the URL (a reload or a shared link shows the same view), and a change polls at once.
import { param } from "./api.js";

const windowSelect = document.getElementById("window");
const sysBox = document.getElementById("sys");
windowSelect.value = param("window") || ":all-time";
sysBox.checked = param("sys") === "1";

// The query string of the REST calls: ?window=W&sys=0|1.
export function statsQuery() {
  return `window=${encodeURIComponent(windowSelect.value)}&sys=${sysBox.checked ? 1 : 0}`;
}

export function onStatsChange(poller) {
  const changed = () => {
    const url = new URL(window.location.href);
    url.searchParams.set("window", windowSelect.value);
    url.searchParams.set("sys", sysBox.checked ? "1" : "0");
    window.history.replaceState(null, "", url);
    poller.refresh();
  };
  windowSelect.addEventListener("change", changed);
  sysBox.addEventListener("change", changed);
}
