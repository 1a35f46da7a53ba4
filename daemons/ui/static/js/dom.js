// Small DOM helpers shared by the pages: elements, links, tables that keep their rows'
// identity between polls (so a reader's selection and scroll survive a refresh).

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function link(href, text) {
  return el("a", { href }, text);
}

export function logLink(href, text = "log") {
  return href ? el("a", { href, class: "log-link", target: "_blank", rel: "noopener" }, text) : "";
}

export const enc = encodeURIComponent;

export function topologyHref(id) {
  return `topology.html?id=${enc(id)}`;
}

export function componentHref(topologyId, id) {
  return `component.html?topology_id=${enc(topologyId)}&id=${enc(id)}`;
}

export function supervisorHref(id) {
  return `supervisor.html?id=${enc(id)}`;
}

export function number(value) {
  return typeof value === "number" ? value.toLocaleString("en-US") : value;
}

// columns: [{title, value: row => text|Node, cls?: row => class, tip?, raw?: no thousands separators}]
export function renderTable(container, columns, rows, empty = "none") {
  const head = el("thead", {}, el("tr", {}, columns.map((c) => el("th", { title: c.tip }, c.title))));
  const body = el("tbody");
  if (!rows.length) {
    body.append(el("tr", {}, el("td", { colspan: columns.length, class: "empty" }, empty)));
  }
  for (const row of rows) {
    body.append(el("tr", {}, columns.map((c) => {
      const value = c.value(row);
      return el("td", { class: c.cls ? c.cls(row) : undefined }, typeof value === "number" && !c.raw ? number(value) : value);
    })));
  }
  const table = el("table", { class: "data" }, head, body);
  container.replaceChildren(table);
  return table;
}

export function capacityClass(capacity) {
  const value = parseFloat(capacity);
  if (value >= 0.8) return "hot";
  if (value >= 0.5) return "warm";
  return undefined;
}

export function setText(id, text) {
  const node = document.getElementById(id);
  if (node) node.textContent = text;
}

export function keyValueTable(container, pairs) {
  renderTable(container, [{ title: "Key", value: (r) => r[0] }, { title: "Value", value: (r) => r[1] }], pairs);
}

export function statusBadge(status) {
  return el("span", { class: `status status-${String(status).toLowerCase()}` }, status);
}

export function errorTime(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "";
}

export function ago(secs) {
  if (secs === null || secs === undefined) return "";
  if (secs < 120) return `${secs}s ago`;
  if (secs < 7200) return `${Math.floor(secs / 60)}m ago`;
  return `${Math.floor(secs / 3600)}h ago`;
}
