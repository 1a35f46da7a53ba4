// The topology graph as SVG, drawn where the REST answer's layered layout puts each node
// (`:layer`, `:row` from /api/v1/topology/ID/visualization). Bolts are coloured by capacity,
// edges into a bolt that holds back-pressure are red, each edge is labelled with its stream and
// grouping, and each node links to its component page.
import { componentHref } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const ROW_HEIGHT = 64;
const NODE_HEIGHT = 34;
const GAP = 150; // between columns: room for the edge labels
const MARGIN = 24;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// 0 -> pale green, 0.5 -> amber, >= 1 -> red: the capacity colours of the tables.
export function capacityColour(capacity) {
  const c = Math.max(0, Math.min(1, Number(capacity) || 0));
  const hue = 120 - 120 * c;
  return `hsl(${hue.toFixed(0)}, 70%, ${(88 - 20 * c).toFixed(0)}%)`;
}

function label(id, node) {
  return node[":type"] === "spout" ? id : `${id}  ${Number(node[":capacity"]).toFixed(2)}`;
}

export function drawGraph(container, topologyId, vis) {
  const ids = Object.keys(vis).sort();
  const width = Math.max(90, ...ids.map((id) => label(id, vis[id]).length * 7.5 + 24));
  const columns = Math.max(1, ...ids.map((id) => vis[id][":layer"] + 1));
  const rows = Math.max(1, ...ids.map((id) => vis[id][":row"] + 1));
  const pos = {};
  for (const id of ids) {
    pos[id] = { x: MARGIN + vis[id][":layer"] * (width + GAP), y: MARGIN + vis[id][":row"] * ROW_HEIGHT };
  }
  const root = svg("svg", {
    width: MARGIN * 2 + columns * width + (columns - 1) * GAP,
    height: MARGIN * 2 + rows * ROW_HEIGHT + 30,
    role: "img", "aria-label": `graph of ${ids.length} components`,
  });
  const defs = svg("defs");
  defs.append(arrowHead("arrow", "#8a98a8"), arrowHead("arrow-bp", "#c62828"));
  root.append(defs);
  const edges = svg("g", { class: "edges" });
  const seen = {};
  for (const dst of ids) {
    for (const input of vis[dst][":inputs"]) {
      const src = input[":component"];
      if (!pos[src]) continue;
      const key = `${src}->${dst}`;
      const nth = (seen[key] = (seen[key] || 0) + 1) - 1;
      edges.append(edge(pos[src], pos[dst], width, nth, input, vis[dst][":backpressure"], src, dst));
    }
  }
  const nodes = svg("g", { class: "nodes" });
  for (const id of ids) nodes.append(node(topologyId, id, vis[id], pos[id], width));
  root.append(edges, nodes, legend(MARGIN, MARGIN + rows * ROW_HEIGHT + 8));
  container.replaceChildren(root);
}

function arrowHead(id, colour) {
  const marker = svg("marker", { id, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: colour }));
  return marker;
}

function edge(from, to, width, nth, input, backpressure, src, dst) {
  const offset = nth * 8;
  const x1 = from.x + width, y1 = from.y + NODE_HEIGHT / 2 + offset;
  const x2 = to.x, y2 = to.y + NODE_HEIGHT / 2 + offset;
  let d, lx, ly;
  if (x2 > x1) {
    const bend = (x2 - x1) / 2;
    d = `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
    lx = x1 + (x2 - x1) * 0.5;
    ly = (y1 + y2) / 2 - 4;
  } else {
    // A loop back to an earlier column: around below both nodes.
    const low = Math.max(y1, y2) + ROW_HEIGHT * 0.6;
    d = `M${x1},${y1} C${x1 + 60},${low} ${x2 - 60},${low} ${x2},${y2}`;
    lx = (x1 + x2) / 2;
    ly = low - 2;
  }
  const text = `${input[":stream"]} · ${input[":grouping"]}`;
  const g = svg("g", { class: backpressure ? "edge backpressure" : "edge", "data-from": src, "data-to": dst });
  g.append(svg("title", {}, `${src} → ${dst}: stream ${input[":stream"]}, ${input[":grouping"]} grouping` +
    (backpressure ? `; ${dst} holds back-pressure` : "")));
  g.append(svg("path", { d, "marker-end": backpressure ? "url(#arrow-bp)" : "url(#arrow)" }));
  g.append(svg("text", { x: lx, y: ly, "text-anchor": "middle" }, text));
  return g;
}

function node(topologyId, id, data, p, width) {
  const spout = data[":type"] === "spout";
  const a = svg("a", { href: componentHref(topologyId, id), class: `node ${data[":type"]}`, "data-id": id });
  const capacity = Number(data[":capacity"]) || 0;
  a.append(svg("title", {}, spout
    ? `spout ${id}: complete latency ${data[":latency"]} ms`
    : `bolt ${id}: capacity ${capacity.toFixed(3)}, execute latency ${data[":latency"]} ms` +
      (data[":backpressure"] ? ", back-pressure ON" : "")));
  a.append(svg("rect", {
    x: p.x, y: p.y, width, height: NODE_HEIGHT, rx: spout ? 17 : 4,
    fill: spout ? "#dcebfb" : capacityColour(capacity),
  }));
  a.append(svg("text", { x: p.x + width / 2, y: p.y + NODE_HEIGHT / 2 + 4, "text-anchor": "middle" }, label(id, data)));
  return a;
}

function legend(x, y) {
  const g = svg("g", { class: "legend" });
  g.append(svg("text", { x, y: y + 12 }, "bolt colour: capacity 0"));
  [0, 0.25, 0.5, 0.75, 1].forEach((c, i) => {
    g.append(svg("rect", { x: x + 150 + i * 22, y: y + 1, width: 20, height: 14, fill: capacityColour(c) }));
  });
  g.append(svg("text", { x: x + 265, y: y + 12 }, "1 (busy)   red edge: back-pressure from its target"));
  return g;
}
