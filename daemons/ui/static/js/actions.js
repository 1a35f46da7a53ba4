// Topology actions behind a confirmation dialog. When the cluster has a secret and the login is not
// the admin's, the dialog asks for it (once per browser session) and the POST sends it as the
// bearer header; a refusal (401 wrong secret, 403 read-only) shows its message in the dialog.
import { clusterNeedsSecret, post, secret } from "./api.js";
import { el } from "./dom.js";

// fields: [{name, label, value, type}] -> resolves to {name: value} or null when cancelled.
export async function confirmAction({ title, text, fields = [], run }) {
  const askSecret = (await clusterNeedsSecret()) && !secret.known();
  const inputs = fields.map((f) => el("input", { name: f.name, type: f.type || "number", min: 0, value: f.value }));
  const secretInput = el("input", { name: "secret", type: "password", autocomplete: "off", id: "confirm-secret" });
  const secretLabel = el("label", { hidden: !askSecret }, "Cluster secret (nimbus.authentication.secret) ", secretInput);
  const refusal = el("p", { class: "refusal", hidden: true });
  const ok = el("button", { type: "submit", class: "primary", id: "confirm-ok" }, "Confirm");
  const cancel = el("button", { type: "button", id: "confirm-cancel" }, "Cancel");
  const form = el("form", { method: "dialog" },
    el("h3", {}, title), el("p", {}, text),
    fields.map((f, i) => el("label", {}, `${f.label} `, inputs[i])),
    secretLabel, refusal, el("div", { class: "buttons" }, cancel, ok));
  const dialog = el("dialog", { id: "confirm" }, form);
  document.body.append(dialog);
  return new Promise((resolve) => {
    const close = (result) => {
      dialog.close();
      dialog.remove();
      resolve(result);
    };
    cancel.addEventListener("click", () => close(null));
    dialog.addEventListener("cancel", () => close(null));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const values = Object.fromEntries(fields.map((f, i) => [f.name, inputs[i].value]));
      if (!secretLabel.hidden) secret.remember(secretInput.value);
      ok.disabled = true;
      try {
        close(await run(values));
      } catch (e) {
        refusal.textContent = `${e.error || "refused"}: ${e.message}`;
        refusal.hidden = false;
        ok.disabled = false;
        if (e.status === 401 || e.status === 403) {
          secretLabel.hidden = false; // the secret was wrong, or may not act: ask for it again
          secretInput.value = "";
        }
      }
    });
    dialog.showModal();
  });
}

export function topologyActions(topology, onDone) {
  const id = encodeURIComponent(topology.id);
  const status = topology.status;
  const act = (op, path, body) => () => post(`/topology/${id}/${path}`, body).then((r) => onDone(op, r));
  const button = (label, cls, enabled, open) =>
    el("button", { class: cls, id: `action-${label.toLowerCase()}`, disabled: !enabled, onclick: open }, label);
  const components = [...topology.spouts.map((s) => s.spoutId), ...topology.bolts.map((b) => b.boltId)];
  return [
    button("Activate", "", status === "INACTIVE", () => confirmAction({
      title: `Activate ${topology.name}?`, text: "Its spouts start emitting again.",
      run: act("activate", "activate"),
    })),
    button("Deactivate", "", status === "ACTIVE", () => confirmAction({
      title: `Deactivate ${topology.name}?`, text: "Its spouts stop emitting; tuples in flight finish.",
      run: act("deactivate", "deactivate"),
    })),
    button("Rebalance", "", status === "ACTIVE" || status === "INACTIVE", () => confirmAction({
      title: `Rebalance ${topology.name}?`,
      text: "Deactivates it for the wait, then spreads its executors over the workers again.",
      fields: [
        { name: "wait", label: "Wait (seconds)", value: topology.msgTimeout },
        { name: "workers", label: "Workers", value: topology.workersTotal || topology.requestedWorkers },
        ...components.map((c) => ({ name: `executors:${c}`, label: `Executors of ${c}`, value: executorsOf(topology, c) })),
      ],
      run: (v) => post(`/topology/${id}/rebalance/${encodeURIComponent(v.wait)}`, rebalanceBody(v, topology)).then((r) => onDone("rebalance", r)),
    })),
    button("Kill", "danger", status !== "KILLED", () => confirmAction({
      title: `Kill ${topology.name}?`, text: "Deactivates it for the wait, then stops its workers for good.",
      fields: [{ name: "wait", label: "Wait (seconds)", value: topology.msgTimeout }],
      run: (v) => post(`/topology/${id}/kill/${encodeURIComponent(v.wait)}`).then((r) => onDone("kill", r)),
    })),
  ];
}

function executorsOf(topology, component) {
  const row = [...topology.spouts, ...topology.bolts].find((r) => (r.spoutId || r.boltId) === component);
  return row ? row.executors : 1;
}

function rebalanceBody(values, topology) {
  const executors = {};
  for (const [key, value] of Object.entries(values)) {
    const component = key.slice("executors:".length);
    if (key.startsWith("executors:") && Number(value) !== executorsOf(topology, component)) {
      executors[component] = Number(value);
    }
  }
  return { rebalanceOptions: { numWorkers: Number(values.workers), executors } };
}
