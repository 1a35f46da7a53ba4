// The component page: stats per window, per-stream input and output stats, executors with host,
// port and log link, errors with time, host and port, and the last words of workers that died.
import { get, param, poll } from "./api.js";
import { onStatsChange, statsQuery } from "./controls.js";
import {
  ago, capacityClass, el, errorTime, logLink, renderTable, setText, statusBadge, topologyHref,
} from "./dom.js";

const topologyId = param("topology_id");
const id = param("id");
document.getElementById("topology-link").href = topologyHref(topologyId || "");

async function render() {
  if (!topologyId || !id) throw new Error("the page needs ?topology_id=TOPOLOGY_ID&id=COMPONENT");
  const q = statsQuery();
  const c = await get(`/topology/${encodeURIComponent(topologyId)}/component/${encodeURIComponent(id)}?${q}`);
  const spout = c.componentType === "spout";
  document.title = `storm-py UI: ${c.name} / ${c.id}`;
  setText("name", `${c.id} (${c.componentType})`);
  document.getElementById("topology-link").textContent = c.name;
  document.getElementById("status").replaceChildren(statusBadge(c.topologyStatus));
  renderTable(document.getElementById("summary"), [
    { title: "Topology", value: (r) => el("a", { href: topologyHref(r.topologyId) }, r.name) },
    { title: "Type", value: (r) => r.componentType },
    { title: "Executors", value: (r) => r.executors },
    { title: "Tasks", value: (r) => r.tasks },
  ], [c]);
  renderDeadWorkers(c.deadWorkers || []);
  const latency = spout
    ? [{ title: "Complete latency (ms)", value: (w) => w.completeLatency }]
    : [{ title: "Capacity", value: (w) => w.capacity, cls: (w) => capacityClass(w.capacity) },
       { title: "Execute latency (ms)", value: (w) => w.executeLatency },
       { title: "Executed", value: (w) => w.executed },
       { title: "Process latency (ms)", value: (w) => w.processLatency }];
  renderTable(document.getElementById("windows"), [
    { title: "Window", value: (w) => w.windowPretty },
    { title: "Emitted", value: (w) => w.emitted },
    { title: "Transferred", value: (w) => w.transferred },
    ...latency,
    { title: "Acked", value: (w) => w.acked },
    { title: "Failed", value: (w) => w.failed },
  ], spout ? c.spoutSummary : c.boltStats);
  document.getElementById("input-section").hidden = spout;
  renderTable(document.getElementById("inputs"), [
    { title: "Component", value: (s) => el("a", { href: `component.html?topology_id=${encodeURIComponent(topologyId)}&id=${s.encodedComponent}` }, s.component) },
    { title: "Stream", value: (s) => s.stream },
    { title: "Execute latency (ms)", value: (s) => s.executeLatency },
    { title: "Executed", value: (s) => s.executed },
    { title: "Process latency (ms)", value: (s) => s.processLatency },
    { title: "Acked", value: (s) => s.acked },
    { title: "Failed", value: (s) => s.failed },
  ], c.inputStats, "no input in this window");
  renderTable(document.getElementById("outputs"), [
    { title: "Stream", value: (s) => s.stream },
    { title: "Emitted", value: (s) => s.emitted },
    { title: "Transferred", value: (s) => s.transferred },
    ...(spout ? [{ title: "Complete latency (ms)", value: (s) => s.completeLatency },
                 { title: "Acked", value: (s) => s.acked }, { title: "Failed", value: (s) => s.failed }] : []),
  ], c.outputStats, "no output in this window");
  renderTable(document.getElementById("executors"), [
    { title: "Id", value: (e) => e.id },
    { title: "Host", value: (e) => e.host },
    { title: "Port", value: (e) => e.port, raw: true },
    { title: "Uptime", value: (e) => e.uptime },
    { title: "Emitted", value: (e) => e.emitted },
    { title: "Transferred", value: (e) => e.transferred },
    ...(spout
      ? [{ title: "Complete latency (ms)", value: (e) => e.completeLatency }]
      : [{ title: "Capacity", value: (e) => e.capacity, cls: (e) => capacityClass(e.capacity) },
         { title: "Execute latency (ms)", value: (e) => e.executeLatency },
         { title: "Executed", value: (e) => e.executed }]),
    { title: "Acked", value: (e) => e.acked },
    { title: "Failed", value: (e) => e.failed },
    { title: "Alive", value: (e) => (e.alive === false ? "no" : "yes"), cls: (e) => (e.alive === false ? "hot" : undefined) },
    { title: "Log", value: (e) => logLink(e.workerLogLink) },
  ], c.executorStats, "no executors");
  renderTable(document.getElementById("errors"), [
    { title: "Time", value: (e) => errorTime(e.errorTime) },
    { title: "When", value: (e) => ago(e.errorLapsedSecs) },
    { title: "Host", value: (e) => e.errorHost },
    { title: "Port", value: (e) => e.errorPort, raw: true },
    { title: "Error", value: (e) => e.error, cls: () => "error" },
    { title: "Log", value: (e) => logLink(e.errorWorkerLogLink) },
  ], c.componentErrors, "no errors reported");
}

// A worker of this component that died: why (the supervisor's record) and its log's last lines.
function renderDeadWorkers(deaths) {
  const box = document.getElementById("dead-workers");
  box.replaceChildren(...deaths.map((d) => el("div", { class: "notice dead-worker" },
    el("strong", {}, `Worker ${d.host}:${d.port} died ${ago(d.lapsedSecs)}: ${d.reason}`),
    el("div", {}, [
      d.exitCode !== null ? `exit code ${d.exitCode}` : null,
      d.signal ? `killed by ${d.signal}` : null,
      d.errorLine ? el("span", { class: "error" }, ` — ${d.errorLine}`) : null,
      " ", logLink(d.workerLogLink, "whole log"),
    ].filter((x) => x !== null)),
    d.logTail ? el("details", { open: true }, el("summary", {}, "Last lines of its log"), el("pre", { class: "log" }, d.logTail)) : null)));
}

const poller = poll(render);
onStatsChange(poller);
