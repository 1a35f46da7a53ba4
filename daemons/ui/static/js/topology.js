// The topology page: status and actions, the diagnosis of a stalled topology, stats per window,
// the graph, spouts and bolts (capacity highlighted), workers with log links, last errors and
// the configuration.
import { get, param, poll } from "./api.js";
import { topologyActions } from "./actions.js";
import { onStatsChange, statsQuery } from "./controls.js";
import {
  ago, capacityClass, componentHref, el, keyValueTable, link, logLink, renderTable, setText,
  statusBadge, supervisorHref,
} from "./dom.js";
import { drawGraph } from "./graph.js";

const RATE_TIP = "tuples a second over the last 10 minutes (as capacity), summed over the executors";

const id = param("id");

let lastStatus = null;

async function render() {
  if (!id) throw new Error("the page needs ?id=TOPOLOGY_ID");
  const enc = encodeURIComponent(id);
  const [t, vis] = await Promise.all([get(`/topology/${enc}?${statsQuery()}`), get(`/topology/${enc}/visualization?${statsQuery()}`)]);
  document.title = `storm-py UI: ${t.name}`;
  setText("name", t.name);
  document.getElementById("status").replaceChildren(statusBadge(t.status));
  if (t.status !== lastStatus) {
    lastStatus = t.status;
    document.getElementById("actions").replaceChildren(...topologyActions(t, done));
  }
  const diagnosis = document.getElementById("diagnosis");
  diagnosis.hidden = !t.diagnosis.length;
  diagnosis.replaceChildren(el("strong", {}, "What holds it back:"), el("ul", {}, t.diagnosis.map((d) => el("li", {}, d))));
  renderTable(document.getElementById("summary"), [
    { title: "Id", value: (r) => r.id },
    { title: "Owner", value: (r) => r.owner },
    { title: "Status", value: (r) => r.status },
    { title: "Uptime", value: (r) => r.uptime },
    { title: "Workers", value: (r) => `${r.workersTotal} of ${r.requestedWorkers}` },
    { title: "Executors", value: (r) => r.executorsTotal },
    { title: "Tasks", value: (r) => r.tasksTotal },
    { title: "Message timeout", value: (r) => `${r.msgTimeout}s` },
    { title: "Worker restarts (since each supervisor started)", value: (r) => r.workerRestarts.reduce((n, w) => n + w.restarts, 0), cls: (r) => (r.workerRestarts.length ? "warm" : undefined) },
  ], [t]);
  const cp = t.checkpoints;
  document.getElementById("checkpoints-section").hidden = !cp;
  if (cp) {
    renderTable(document.getElementById("checkpoints"), [
      { title: "Last committed txid", value: (c) => (c.lastCommittedTxid ?? "none yet") },
      { title: "Committed", value: (c) => (c.lastCommitAgeSecs == null ? "" : `${c.lastCommitAgeSecs}s ago`), cls: (c) => (c.lastCommitAgeSecs > t.msgTimeout ? "hot" : undefined) },
      { title: "Checkpoints", value: (c) => c.commits },
      { title: "Commit latency (ms)", value: (c) => (c.commitLatencyMs ?? "") },
      { title: "Max commit latency (ms)", value: (c) => (c.commitLatencyMaxMs ?? "") },
      { title: "Alignment (ms)", value: (c) => (c.alignmentMs ?? "") },
      { title: "Max alignment, last 60 (ms)", value: (c) => (c.alignmentMaxMs ?? "") },
      { title: "Rollbacks", value: (c) => c.rollbacks, cls: (c) => (c.rollbacks ? "warm" : undefined) },
      { title: "Recovering", value: (c) => (c.recovering ? "yes" : "no") },
      { title: "Started from savepoint", value: (c) => (c.startedFromSavepoint ?? "") },
    ], [cp]);
  }
  const wins = t.windows;
  document.getElementById("windows-section").hidden = !wins;
  if (wins) {
    renderTable(document.getElementById("windows"), [
      { title: "Windowed bolt", value: (w) => link(componentHref(t.id, w.componentId), w.componentId) },
      { title: "Tuples in its windows", value: (w) => w.eventsInWindow },
      { title: "Of them in memory (persistent)", value: (w) => (w.eventsInMemory ?? "all") },
      { title: "Late tuples", value: (w) => w.lateTuples, cls: (w) => (w.lateTuples ? "warm" : undefined) },
    ], wins);
  }
  renderTable(document.getElementById("stats"), [
    { title: "Window", value: (w) => w.windowPretty },
    { title: "Emitted", value: (w) => w.emitted },
    { title: "Transferred", value: (w) => w.transferred },
    { title: "Complete latency (ms)", value: (w) => w.completeLatency },
    { title: "Acked", value: (w) => w.acked },
    { title: "Failed", value: (w) => w.failed },
  ], t.topologyStats);
  drawGraph(document.getElementById("graph"), t.id, vis);
  const errorCell = (r) => r.lastError;
  // Per-second figures as the REST API computes them (storm-py monitor's throughput, over the
  // last 10 minutes): shown, not computed, here.
  const rate = (v) => (v === undefined || v === null ? "" : Number(v).toFixed(1));
  renderTable(document.getElementById("spouts"), [
    { title: "Id", value: (s) => link(componentHref(t.id, s.spoutId), s.spoutId) },
    { title: "Executors", value: (s) => s.executors },
    { title: "Tasks", value: (s) => s.tasks },
    { title: "Emitted", value: (s) => s.emitted },
    { title: "Emitted/s", value: (s) => rate(s.emittedPerSec), tip: RATE_TIP },
    { title: "Transferred", value: (s) => s.transferred },
    { title: "Complete latency (ms)", value: (s) => s.completeLatency },
    { title: "Acked", value: (s) => s.acked },
    { title: "Acked/s", value: (s) => rate(s.ackedPerSec), tip: RATE_TIP },
    { title: "Failed", value: (s) => s.failed },
    { title: "Last error", value: errorCell, cls: () => "error" },
  ], t.spouts, "no spouts");
  renderTable(document.getElementById("bolts"), [
    { title: "Id", value: (b) => link(componentHref(t.id, b.boltId), b.boltId) },
    { title: "Executors", value: (b) => b.executors },
    { title: "Tasks", value: (b) => b.tasks },
    { title: "Emitted", value: (b) => b.emitted },
    { title: "Emitted/s", value: (b) => rate(b.emittedPerSec), tip: RATE_TIP },
    { title: "Transferred", value: (b) => b.transferred },
    { title: "Capacity", value: (b) => b.capacity, cls: (b) => capacityClass(b.capacity), tip: "share of the window the executors spent executing; near 1 the bolt is the bottleneck" },
    { title: "Execute latency (ms)", value: (b) => b.executeLatency },
    { title: "Executed", value: (b) => b.executed },
    { title: "Executed/s", value: (b) => rate(b.executedPerSec), tip: RATE_TIP },
    { title: "Process latency (ms)", value: (b) => b.processLatency },
    { title: "Acked", value: (b) => b.acked },
    { title: "Acked/s", value: (b) => rate(b.ackedPerSec), tip: RATE_TIP },
    { title: "Failed", value: (b) => b.failed },
    { title: "Back-pressure", value: (b) => (vis[b.boltId] && vis[b.boltId][":backpressure"] ? "ON" : ""), cls: (b) => (vis[b.boltId] && vis[b.boltId][":backpressure"] ? "hot" : undefined) },
    { title: "Last error", value: errorCell, cls: () => "error" },
  ], t.bolts, "no bolts");
  renderTable(document.getElementById("workers"), [
    { title: "Host", value: (w) => w.host },
    { title: "Port", value: (w) => w.port, raw: true },
    { title: "Pid", value: (w) => (w.pid == null ? "" : w.pid), raw: true },
    { title: "Supervisor", value: (w) => link(supervisorHref(w.supervisorId), w.supervisorId) },
    { title: "Uptime", value: (w) => w.uptime },
    { title: "Executors", value: (w) => w.executorsTotal },
    { title: "Components", value: (w) => Object.entries(w.componentNumTasks).map(([c, n]) => `${c} (${n})`).join(", ") },
    { title: "Alive", value: (w) => (w.alive ? "yes" : "no"), cls: (w) => (w.alive ? undefined : "hot") },
    { title: "Log", value: (w) => logLink(w.workerLogLink) },
  ], t.workers, "no workers assigned");
  const errors = [...t.spouts.map((s) => [s.spoutId, s]), ...t.bolts.map((b) => [b.boltId, b])]
    .filter(([, r]) => r.lastError);
  renderTable(document.getElementById("errors"), [
    { title: "Component", value: ([c]) => link(componentHref(t.id, c), c) },
    { title: "Host", value: ([, r]) => r.errorHost },
    { title: "Port", value: ([, r]) => r.errorPort, raw: true },
    { title: "When", value: ([, r]) => ago(r.errorLapsedSecs) },
    { title: "Error", value: ([, r]) => r.lastError, cls: () => "error" },
    { title: "Log", value: ([, r]) => logLink(r.errorWorkerLogLink) },
  ], errors, "no errors reported");
  keyValueTable(document.getElementById("configuration"),
    Object.entries(t.configuration).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, JSON.stringify(v)]));
}

function done(op, answer) {
  const note = document.getElementById("action-result");
  note.hidden = false;
  note.textContent = `${op}: ${answer.status}`;
  if (op === "kill") {
    window.location.href = "index.html";
    return;
  }
  lastStatus = null;
  poller.refresh();
}

const poller = poll(render);
onStatsChange(poller);
