// store-metrics: what both State store pages share. Plain ES modules, no build step.
// Nothing here writes HTML from data: every value goes in with textContent.

// -- the theme: follow Airflow's UI (the iframe is same-origin: it may look at its parent) ----------

function airflowTheme() {
  try {
    const root = window.parent !== window ? window.parent.document.documentElement : null;
    if (root && root.classList.contains("dark")) return "dark";
    if (root && root.classList.contains("light")) return "light";
  } catch (e) {
    // not framed by Airflow (opened on its own): fall through
  }
  try {
    const chosen = window.localStorage.getItem("theme"); // Airflow's UI keeps "light" | "dark" | "system"
    if (chosen === "dark" || chosen === "light") return chosen;
  } catch (e) {
    // storage not available
  }
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function followTheme() {
  const apply = () => {
    document.documentElement.dataset.theme = airflowTheme();
  };
  apply();
  try {
    if (window.parent !== window) {
      new MutationObserver(apply).observe(window.parent.document.documentElement, {
        attributes: true,
        attributeFilter: ["class", "style"],
      });
    }
  } catch (e) {
    // not same-origin: the stored choice and the system's are all we have
  }
  window.addEventListener("storage", apply);
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", apply);
}

// -- DOM ----------------------------------------------------------------------------------------

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function replace(id, ...children) {
  const node = document.getElementById(id);
  node.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined));
  return node;
}

export function notice(kind, text) {
  return el("div", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

// -- numbers ------------------------------------------------------------------------------------

const integer = new Intl.NumberFormat("en-US");

export function count(n) {
  return n === null || n === undefined ? "–" : integer.format(Math.round(n));
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${integer.format(n)} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

export function ratio(r) {
  return r === null || r === undefined ? "–" : `${(r * 100).toFixed(1)} %`;
}

export function ago(iso, now = Date.now()) {
  if (!iso) return "–";
  return `${duration((now - Date.parse(iso)) / 1000)} ago`;
}

export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// A cell: its number, and a field name the tests (and anyone scripting the page) can find it by.
export function cell(field, text, title) {
  return el("td", { "data-field": field, title }, text);
}

// The stored-bytes cell, with a bar relative to the largest of the table.
export function bytesCell(value, largest) {
  const fill = el("span", { class: "fill" });
  // Through the CSSOM: the pages' Content-Security-Policy allows no inline style attribute.
  fill.style.width = `${largest > 0 && value ? Math.max(1, Math.round((100 * value) / largest)) : 0}%`;
  return el(
    "td",
    { class: "bar", "data-field": "bytes", "data-value": value, title: `${integer.format(value)} bytes` },
    fill,
    el("span", { class: "num" }, bytes(value)),
  );
}

// The columns every footprint row has after its name.
export const FOOTPRINT_HEADERS = ["entries", "bytes", "oldest write", "newest write", "expired", "external"];

export function footprintCells(row, largest, hasExpiry = true) {
  const expired = row.expired;
  return [
    cell("entries", count(row.entries)),
    bytesCell(row.bytes, largest),
    cell("oldest", ago(row.oldest), row.oldest),
    cell("newest", ago(row.newest), row.newest),
    hasExpiry
      ? el("td", { "data-field": "expired", class: expired ? "expired" : null }, count(expired))
      : cell("expired", "–", "the asset store has no expiry"),
    cell(
      "external",
      count(row.external),
      row.external ? "entries whose value a custom state store backend holds: their size is not known here" : null,
    ),
  ];
}

// -- requests -------------------------------------------------------------------------------------

export class HttpError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

export async function getJson(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) {
    let detail = response.statusText;
    try {
      detail = (await response.json()).detail || detail;
    } catch (e) {
      // not JSON
    }
    throw new HttpError(response.status, detail);
  }
  return response.json();
}

// A problem as the JSON names it (its kind: the details are only in the API server's log).
export function problemText(problem, then = "") {
  const said = problem.charAt(0).toUpperCase() + problem.slice(1);
  return `${said} (the details are in the API server's log). ${then}`.trim();
}

export function refusal(error, what) {
  if (error.status === 401) return "Your Airflow session has ended: log in again, then reload this page.";
  if (error.status === 403) return `You may not read ${what}: Airflow's permissions do not let you see it.`;
  return `Could not load ${what}: ${error.message}`;
}

export function freshness(data) {
  if (!data.read_at) return "";
  const parts = [
    `Read from the metadata database ${duration(data.age_seconds)} ago`,
    `in ${data.query_ms} ms`,
    `refreshed at most every ${duration(data.cache_ttl)} per API server worker`,
  ];
  return `${parts.join(", ")}. Only counts and sizes leave the database, never a key or a value.`;
}
