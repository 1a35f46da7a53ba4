// The supervisor page: its slots (free or running a worker, with restarts) and its workers.
import { get, param, poll } from "./api.js";
import { link, logLink, renderTable, setText, topologyHref } from "./dom.js";

const id = param("id");
const host = param("host");

async function render() {
  if (!id && !host) throw new Error("the page needs ?id=SUPERVISOR_ID (or ?host=HOST)");
  const s = await get(id ? `/supervisor?id=${encodeURIComponent(id)}` : `/supervisor?host=${encodeURIComponent(host)}`);
  document.title = `storm-py UI: supervisor ${s.host}`;
  setText("name", `Supervisor ${s.id} on ${s.host}`);
  renderTable(document.getElementById("summary"), [
    { title: "Id", value: (r) => r.id },
    { title: "Host", value: (r) => r.host },
    { title: "Uptime", value: (r) => r.uptime },
    { title: "Slots", value: (r) => r.slotsTotal },
    { title: "Used slots", value: (r) => r.slotsUsed },
    { title: "Version", value: (r) => r.version },
  ], [s]);
  renderTable(document.getElementById("slots"), [
    { title: "Port", value: (p) => p.port, raw: true },
    { title: "Topology", value: (p) => (p.used ? link(topologyHref(p.topologyId), p.topologyName) : "free") },
    { title: "Worker restarts (since the supervisor started)", value: (p) => p.restarts, cls: (p) => (p.restarts ? "warm" : undefined) },
  ], s.slots || []);
  renderTable(document.getElementById("workers"), [
    { title: "Port", value: (w) => w.port, raw: true },
    { title: "Pid", value: (w) => (w.pid == null ? "" : w.pid), raw: true },
    { title: "Topology", value: (w) => link(topologyHref(w.topologyId), w.topologyName) },
    { title: "Uptime", value: (w) => w.uptime },
    { title: "Executors", value: (w) => w.executorsTotal },
    { title: "Components", value: (w) => Object.entries(w.componentNumTasks).map(([c, n]) => `${c} (${n})`).join(", ") },
    { title: "Log", value: (w) => logLink(w.workerLogLink) },
  ], s.workers, "no workers");
}

poll(render);
