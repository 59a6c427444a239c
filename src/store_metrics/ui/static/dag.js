// The State store tab of one DAG (Airflow's UI frames this page with the DAG's id in the URL).
import {
  FOOTPRINT_HEADERS,
  bytes,
  cell,
  count,
  el,
  followTheme,
  footprintCells,
  freshness,
  getJson,
  notice,
  problemText,
  ratio,
  refusal,
  replace,
} from "./common.js";

followTheme();

const dagId = decodeURIComponent(window.location.pathname.replace(/\/+$/, "").split("/").pop());
const api = `../api/dags/${encodeURIComponent(dagId)}`;
const page = document.getElementById("page");
document.getElementById("dag-id").textContent = dagId;

function footprintTable(rows, nameHeader, nameField, hasExpiry, totals) {
  if (rows.length === 0) return el("p", { class: "empty" }, "Nothing stored.");
  const largest = Math.max(...rows.map((r) => r.bytes));
  const head = el("tr", {}, el("th", {}, nameHeader), FOOTPRINT_HEADERS.map((h) => el("th", {}, h)));
  const body = rows.map((row) =>
    el(
      "tr",
      { "data-row": row[nameField] },
      el("td", { class: "text", "data-field": "name" }, row[nameField]),
      footprintCells(row, largest, hasExpiry),
    ),
  );
  const foot =
    rows.length > 1 && totals
      ? el("tr", { class: "total", "data-row": "(total)" }, el("td", {}, "all"), footprintCells(totals, 0, hasExpiry))
      : null;
  return el("table", { "data-table": nameField }, el("thead", {}, head), el("tbody", {}, body, foot));
}

function card(label, value, field) {
  return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value", "data-field": field }, value));
}

function summary(totals) {
  const task = totals.task || { entries: 0, bytes: 0, expired: 0, external: 0 };
  const asset = totals.asset || { entries: 0, bytes: 0, external: 0 };
  return [
    card("task state entries", count(task.entries), "task-entries"),
    card("task state size", bytes(task.bytes), "task-bytes"),
    card("expired, not cleaned up", count(task.expired), "task-expired"),
    card("asset state entries", count(asset.entries), "asset-entries"),
    card("asset state size", bytes(asset.bytes), "asset-bytes"),
  ];
}

const OPERATIONS = [
  ["read_found", "reads found"],
  ["read_absent", "reads absent"],
  ["write", "writes"],
  ["delete", "deletes"],
  ["clear", "clears"],
  ["error", "errors"],
];
const STORES = [
  ["task_state_store", "task"],
  ["asset_state_store", "asset"],
];

// Retried attempts (try 2 and later) of the task: resumed / all that read, on its task store row.
function retryCells(task, store) {
  const retries = task.retries || { resumed: 0, started_over: 0, resume_rate: null };
  if (store !== "task_state_store") return [cell("retried", ""), cell("resume_rate", "")];
  const retried = retries.resumed + retries.started_over;
  return [
    cell("retried", count(retried), `${retries.resumed} resumed, ${retries.started_over} started over`),
    cell("resume_rate", ratio(retries.resume_rate)),
  ];
}

function callsTable(data) {
  const rows = [];
  for (const task of data.tasks) {
    for (const [store, word] of STORES) {
      const counts = OPERATIONS.map(([op]) => task.calls[`${store}.${op}`] || 0);
      if (counts.every((n) => n === 0)) continue;
      rows.push(
        el(
          "tr",
          { "data-row": `${task.task_id}/${word}` },
          el("td", { class: "text", "data-field": "task" }, task.task_id),
          el("td", { class: "text", "data-field": "store" }, word),
          OPERATIONS.map(([op], i) => cell(op, count(counts[i]), `${counts[i]}`)),
          cell("found_ratio", ratio(task.found_ratio[store])),
          retryCells(task, store),
        ),
      );
    }
  }
  if (rows.length === 0) return el("p", { class: "empty" }, `No state store calls in the last ${data.window}.`);
  const head = el(
    "tr",
    {},
    el("th", {}, "task"),
    el("th", { class: "text" }, "store"),
    OPERATIONS.map(([, label]) => el("th", {}, label)),
    el("th", {}, "found ratio"),
    el("th", { title: "Retried attempts (try 2 and later) that read the task store" }, "retries"),
    el("th", { title: "Retried attempts whose first read found what an earlier attempt saved" }, "resumed"),
  );
  return el("table", { "data-table": "calls" }, el("thead", {}, head), el("tbody", {}, rows));
}

async function loadCalls(window_) {
  replace("calls", el("p", { class: "empty" }, "Loading…"));
  try {
    const data = await getJson(`${api}/calls?window=${encodeURIComponent(window_)}`);
    replace(
      "calls",
      data.problem ? notice("warn", problemText(data.problem)) : null,
      callsTable(data),
      el(
        "p",
        { class: "muted" },
        `Calls in the last ${data.window} per task, from the counters Prometheus holds (the dashboards' series; found ratio = reads found / all reads; resumed = retried attempts whose first read found a value / all retried attempts that read). `,
        el("details", {}, el("summary", {}, "PromQL"), el("code", {}, data.query || "")),
      ),
    );
  } catch (error) {
    replace("calls", notice("error", refusal(error, "this DAG's calls")));
  }
}

function calls(setup) {
  if (!setup.configured) {
    replace("calls", el("p", { class: "muted", "data-field": "calls-how" }, setup.how));
    return;
  }
  const select = document.getElementById("window");
  select.replaceChildren(...setup.windows.map((w) => el("option", { value: w, selected: w === setup.default_window }, `last ${w}`)));
  select.classList.remove("hidden");
  select.addEventListener("change", () => loadCalls(select.value));
  loadCalls(setup.default_window);
}

async function main() {
  let data;
  try {
    data = await getJson(`${api}/footprint`);
  } catch (error) {
    for (const id of ["tasks", "assets", "calls"]) replace(id);
    replace("problems", notice("error", refusal(error, `DAG ${dagId}`)));
    page.dataset.state = "refused";
    return;
  }
  const links = [el("a", { href: `../../plugin/${data.page_route}`, target: "_top" }, "All DAGs' state store")];
  if (data.grafana_url) links.push(el("a", { href: data.grafana_url, target: "_blank", rel: "noopener" }, "Grafana dashboard for this DAG"));
  replace("links", links);
  replace(
    "problems",
    data.problem ? notice("warn", problemText(data.problem, data.read_at ? "Showing the last reading." : "")) : null,
    data.config_problem ? notice("warn", `[store_metrics] configuration: ${data.config_problem}`) : null,
  );
  replace("summary", summary(data.totals));
  replace("tasks", footprintTable(data.tasks, "task", "task_id", true, data.totals.task));
  replace("assets", footprintTable(data.assets, "asset", "asset", false, data.totals.asset));
  replace("freshness", freshness(data));
  calls(data.calls);
  page.dataset.state = "ready";
}

main();
