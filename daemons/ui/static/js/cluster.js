// The cluster page: Nimbus, topologies, supervisors and their slots.
import { get, poll } from "./api.js";
import { link, renderTable, statusBadge, supervisorHref, topologyHref } from "./dom.js";

async function render() {
  const [cluster, nimbus, topologies, supervisors] = await Promise.all([
    get("/cluster/summary"), get("/nimbus/summary"), get("/topology/summary"), get("/supervisor/summary"),
  ]);
  renderTable(document.getElementById("cluster"), [
    { title: "Version", value: (c) => c.stormVersion },
    { title: "Nimbus uptime", value: (c) => c.nimbusUptime },
    { title: "Supervisors", value: (c) => c.supervisors },
    { title: "Used slots", value: (c) => c.slotsUsed },
    { title: "Free slots", value: (c) => c.slotsFree },
    { title: "Total slots", value: (c) => c.slotsTotal },
    { title: "Executors", value: (c) => c.executorsTotal },
    { title: "Tasks", value: (c) => c.tasksTotal },
  ], [cluster]);
  renderTable(document.getElementById("nimbus"), [
    { title: "Host", value: (n) => n.host },
    { title: "Port", value: (n) => n.port, raw: true },
    { title: "Status", value: (n) => n.status },
    { title: "Version", value: (n) => n.version },
    { title: "Uptime", value: (n) => n.nimbusUpTime },
  ], nimbus.nimbuses);
  renderTable(document.getElementById("topologies"), [
    { title: "Name", value: (t) => link(topologyHref(t.id), t.name) },
    { title: "Id", value: (t) => t.id },
    { title: "Owner", value: (t) => t.owner },
    { title: "Status", value: (t) => statusBadge(t.status) },
    { title: "Uptime", value: (t) => t.uptime },
    { title: "Workers", value: (t) => t.workersTotal },
    { title: "Executors", value: (t) => t.executorsTotal },
    { title: "Tasks", value: (t) => t.tasksTotal },
  ], topologies.topologies, "no topology running");
  renderTable(document.getElementById("supervisors"), [
    { title: "Id", value: (s) => link(supervisorHref(s.id), s.id) },
    { title: "Host", value: (s) => s.host },
    { title: "Uptime", value: (s) => s.uptime },
    { title: "Slots", value: (s) => s.slotsTotal },
    { title: "Used slots", value: (s) => s.slotsUsed },
    { title: "Version", value: (s) => s.version },
  ], supervisors.supervisors, "no supervisor is running");
  document.title = `storm-py UI: ${topologies.topologies.length} topologies`;
}

poll(render);
