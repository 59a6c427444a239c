// The State store page of the deployment (Airflow's UI frames it under Browse).
import {
  FOOTPRINT_HEADERS,
  bytes,
  count,
  duration,
  el,
  followTheme,
  footprintCells,
  freshness,
  getJson,
  notice,
  problemText,
  refusal,
  replace,
} from "./common.js";

followTheme();

const page = document.getElementById("page");

function dagLink(dagId, tabRoute) {
  // The DAG's State store tab, in the whole window (this page is framed by Airflow's UI).
  return el("a", { href: `../dags/${encodeURIComponent(dagId)}/plugin/${tabRoute}`, target: "_top" }, dagId);
}

function table(kind, headers, rows, textColumns = [0]) {
  return el(
    "table",
    { "data-table": kind },
    el("thead", {}, el("tr", {}, headers.map((h, i) => el("th", { class: textColumns.includes(i) ? "text" : null }, h)))),
    el("tbody", {}, rows),
  );
}

function dagsTable(data) {
  if (data.dags.length === 0) return el("p", { class: "empty" }, "No task state stored by any DAG you may read.");
  const largest = data.dags[0].bytes;
  const rows = data.dags.map((row) =>
    el("tr", { "data-row": row.dag_id }, el("td", { class: "text", "data-field": "name" }, dagLink(row.dag_id, data.tab_route)), footprintCells(row, largest)),
  );
  const more = data.dag_count > data.dags.length ? el("p", { class: "muted" }, `The ${data.dags.length} largest of ${data.dag_count} DAGs with task state.`) : null;
  return [table("dags", ["DAG", ...FOOTPRINT_HEADERS], rows), more];
}

function expiredTable(data) {
  if (data.expired.length === 0) return el("p", { class: "empty" }, "None: every entry past its retention has been cleaned up.");
  const rows = data.expired.map((row) =>
    el(
      "tr",
      { "data-row": row.dag_id },
      el("td", { class: "text", "data-field": "name" }, dagLink(row.dag_id, data.tab_route)),
      el("td", { class: "expired", "data-field": "expired" }, count(row.expired)),
      el("td", { "data-field": "entries" }, count(row.entries)),
    ),
  );
  return table("expired", ["DAG", "expired entries", "of entries"], rows);
}

function assetsTable(data) {
  if (data.assets === null) return el("p", { class: "muted" }, "You may not read assets.");
  if (data.assets.length === 0) return el("p", { class: "empty" }, "No asset state stored.");
  const largest = data.assets[0].bytes;
  const rows = data.assets.map((row) =>
    el(
      "tr",
      { "data-row": row.asset },
      el("td", { class: "text", "data-field": "name" }, row.asset),
      footprintCells(row, largest, false),
      el(
        "td",
        { class: "text", "data-field": "used_by" },
        row.used_by.length ? row.used_by.flatMap((d, i) => (i ? [", ", dagLink(d, data.tab_route)] : [dagLink(d, data.tab_route)])) : "–",
      ),
    ),
  );
  const more = data.asset_count > data.assets.length ? el("p", { class: "muted" }, `The ${data.assets.length} largest of ${data.asset_count} assets with state.`) : null;
  const headers = ["asset", ...FOOTPRINT_HEADERS, "used by"];
  return [table("assets", headers, rows, [0, headers.length - 1]), more];
}

function inventory(data) {
  const inv = data.inventory;
  if (!inv.configured) {
    return el(
      "p",
      { class: "muted", "data-field": "inventory" },
      "This page reads the tables itself. The freshness of store-metrics inventory (the exporter behind the footprint gauges and alerts) shows here with [store_metrics] ui_prometheus_url set.",
    );
  }
  if (inv.problem) return notice("warn", problemText(inv.problem));
  const stores = Object.entries(inv.stores);
  if (stores.length === 0) return el("p", { class: "muted", "data-field": "inventory" }, "Prometheus holds no store-metrics inventory gauges: is store-metrics inventory --serve running and scraped?");
  return el(
    "p",
    { "data-field": "inventory" },
    "store-metrics inventory: ",
    stores
      .map(([store, s]) => `${store} store read ${s.age_seconds === null ? "?" : duration(s.age_seconds)} ago${s.up === false ? " (its last query failed)" : ""}`)
      .join("; "),
    ".",
  );
}

function card(label, value, field) {
  return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value", "data-field": field }, value));
}

async function main() {
  let data;
  try {
    data = await getJson("api/deployment");
  } catch (error) {
    for (const id of ["dags", "expired", "assets"]) replace(id);
    replace("problems", notice("error", refusal(error, "the state store")));
    page.dataset.state = "refused";
    return;
  }
  const task = data.totals.task || { entries: 0, bytes: 0, expired: 0 };
  replace(
    "problems",
    data.problem ? notice("warn", problemText(data.problem, data.read_at ? "Showing the last reading." : "")) : null,
  );
  replace(
    "summary",
    card("DAGs with task state", count(data.dag_count), "dag-count"),
    card("task state entries", count(task.entries), "task-entries"),
    card("task state size", bytes(task.bytes), "task-bytes"),
    card("expired, not cleaned up", count(task.expired), "task-expired"),
  );
  replace("dags", dagsTable(data));
  replace("expired", expiredTable(data));
  replace("assets", assetsTable(data));
  replace("inventory", inventory(data));
  replace("freshness", freshness(data));
  page.dataset.state = "ready";
}

main();
