// Footfall web UI: each page draws itself from the answers of /ui/api/<path>, which the
// server forwards to the HTTP interface with the session's credentials. No libraries.
"use strict";

const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1f5fbf", "#b3261e", "#2e7d32", "#8a4b00", "#6a1b9a", "#00695c", "#ad1457", "#37474f"];

class ApiError extends Error {}

async function api(path, params, init) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== undefined) query.set(k, v);
  const options = Object.assign({ credentials: "same-origin", headers: { "X-CSRF-Token": CSRF } }, init || {});
  const response = await fetch("/ui/api/" + path + "?" + query.toString(), options);
  if (response.status === 401 && response.headers.get("X-Footfall-Signed-Out")) {
    window.location.assign("/ui/signin?expired=1");
    throw new ApiError("signed out");
  }
  const text = await response.text();
  if (!response.ok) {
    let message = text;
    try { message = JSON.parse(text).error || text; } catch (e) { /* not JSON */ }
    throw new ApiError(message + " (HTTP " + response.status + ")");
  }
  return text;
}

function say(message) { document.getElementById("status").textContent = message; }

function isoDay(date) { return date.toISOString().slice(0, 10); }

function el(tag, attrs, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A bucket key as shown: an ISO timestamp at local midnight is its day, else day and time.
function label(key) {
  const match = /^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d)/.exec(key);
  if (!match) return key;
  return match[2] === "00:00" ? match[1] : `${match[1]} ${match[2]}`;
}

// ---------------------------------------------------------------------------- line chart
function lineChart(figure, series, lines) {
  figure.replaceChildren();
  const width = 860, height = 320, left = 56, right = 48, top = 16, bottom = 40;
  const max = Math.max(1, ...lines.flatMap((l) => l.values));
  const x = (i) => left + (series.length < 2 ? 0 : (i * (width - left - right)) / (series.length - 1));
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": "chart-title" });
  svg.appendChild(el("svg:title", { id: "chart-title" }, "Values over time; the table below holds the same numbers"));
  for (let t = 0; t <= 4; t++) {
    const v = (max * t) / 4;
    svg.appendChild(el("svg:line", { x1: left, x2: width - right, y1: y(v), y2: y(v), class: "grid" }));
    const tick = max >= 20 ? Math.round(v) : Number(v.toFixed(2));
    svg.appendChild(el("svg:text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, tick.toString()));
  }
  const step = Math.max(1, Math.ceil(series.length / 8));
  series.forEach((key, i) => {
    if (i % step === 0) svg.appendChild(el("svg:text", { x: x(i), y: height - 14, "text-anchor": "middle" }, label(key)));
  });
  lines.forEach((line, n) => {
    const color = COLORS[n % COLORS.length];
    const points = line.values.map((v, i) => `${x(i)},${y(v)}`).join(" ");
    const group = el("svg:g", { class: "series", "data-segment": line.name });
    group.appendChild(el("svg:polyline", { points, fill: "none", stroke: color, "stroke-width": 2 }));
    line.values.forEach((v, i) => {
      const dot = el("svg:circle", { cx: x(i), cy: y(v), r: 3, fill: color, "data-date": series[i], "data-value": v });
      dot.appendChild(el("svg:title", {}, `${line.name}, ${label(series[i])}: ${v}`));
      group.appendChild(dot);
    });
    svg.appendChild(group);
  });
  figure.appendChild(svg);
  const legend = el("figcaption", { class: "legend" });
  lines.forEach((line, n) => {
    const item = el("span", {});
    const swatch = el("span", { class: "swatch", "aria-hidden": "true" });
    swatch.style.background = COLORS[n % COLORS.length]; // CSSOM: allowed by the page's CSP, unlike style=""
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(line.name));
    legend.appendChild(item);
  });
  figure.appendChild(legend);
}

function valuesTable(table, series, lines) {
  const head = el("tr", {});
  head.appendChild(el("th", { scope: "col" }, "Segment"));
  series.forEach((d) => head.appendChild(el("th", { scope: "col" }, label(d))));
  table.tHead.replaceChildren(head);
  const body = table.tBodies[0];
  body.replaceChildren();
  lines.forEach((line) => {
    const row = el("tr", { "data-segment": line.name });
    row.appendChild(el("th", { scope: "row" }, line.name));
    line.values.forEach((v, i) => row.appendChild(el("td", { "data-date": series[i], "data-value": v }, String(v))));
    body.appendChild(row);
  });
}

// ---------------------------------------------------------------------------- segmentation
async function segmentation() {
  const form = document.getElementById("segmentation-form");
  const today = new Date();
  const from = new Date(today.getTime() - 6 * 86400000);
  const params = new URLSearchParams(window.location.search);
  for (const field of ["event", "on", "where", "type", "unit"]) if (params.get(field)) form.elements[field].value = params.get(field);
  form.elements.from_date.value = params.get("from_date") || isoDay(from);
  form.elements.to_date.value = params.get("to_date") || isoDay(today);
  api("query/events/names", { type: "general", limit: 255 }).then((text) => {
    const list = document.getElementById("event-names");
    for (const name of JSON.parse(text)) list.appendChild(el("option", { value: name }));
    if (!form.elements.event.value && list.options.length) form.elements.event.value = list.options[0].value;
  }).catch((e) => say(e.message));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const query = Object.fromEntries(new FormData(form).entries());
    history.replaceState(null, "", "?" + new URLSearchParams(query).toString());
    say("Loading…");
    try {
      const answer = JSON.parse(await api("query/segmentation", query));
      const series = answer.data.series;
      const lines = Object.entries(answer.data.values).map(([name, byDate]) => ({
        name, values: series.map((d) => byDate[d] ?? 0),
      }));
      lineChart(document.getElementById("chart"), series, lines);
      valuesTable(document.getElementById("values"), series, lines);
      say(`${lines.length} segment(s), ${series.length} point(s) each.`);
    } catch (e) {
      if (e instanceof ApiError) say(e.message); else throw e;
    }
  });
  if (params.get("event")) form.requestSubmit();
}

// ---------------------------------------------------------------------------- live events
const LIVE_ROWS = 50;
const LIVE_WINDOW_S = 600; // the events of the last 10 minutes
const LIVE_CAP = 20000; // at most this many events are fetched per refresh
// Each refresh is one /api/2.0/export call and spends the project's export budget
// (FOOTFALL_EXPORT_RATE_PER_HOUR, 60 by default): once a minute keeps an open page within it.
const LIVE_EVERY_MS = 60000;

async function live() {
  const form = document.getElementById("live-form");
  let timer = null;
  let latest = 0; // only the newest refresh draws: an older answer arriving late is dropped
  async function refresh() {
    const mine = ++latest;
    const now = Math.floor(Date.now() / 1000);
    const since = now - LIVE_WINDOW_S;
    const recent = `properties["time"] >= datetime(${since})`;
    const where = form.elements.where.value.trim();
    const query = {
      from_date: isoDay(new Date((since - 86400) * 1000)), // a day of margin for the project's time zone
      to_date: isoDay(new Date((now + 86400) * 1000)),
      where: where ? `(${where}) and ${recent}` : recent,
      limit: LIVE_CAP,
    };
    const name = form.elements.event.value.trim();
    if (name) query.event = JSON.stringify([name]);
    try {
      const text = await api("2.0/export", query);
      if (mine !== latest) return;
      const events = text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
      events.sort((a, b) => (b.properties.time ?? 0) - (a.properties.time ?? 0));
      const body = document.querySelector("#events tbody");
      body.replaceChildren();
      for (const e of events.slice(0, LIVE_ROWS)) {
        const row = el("tr", {});
        const { time, distinct_id, ...rest } = e.properties;
        row.appendChild(el("td", {}, new Date((time ?? 0) * 1000).toISOString().replace("T", " ").slice(0, 19)));
        row.appendChild(el("td", {}, e.event));
        row.appendChild(el("td", {}, String(distinct_id ?? "")));
        row.appendChild(el("td", { class: "props" }, JSON.stringify(rest)));
        body.appendChild(row);
      }
      const filter = [name && `named "${name}"`, where && `where ${where}`].filter(Boolean).join(" ");
      const more = events.length >= LIVE_CAP ? " (the first " + LIVE_CAP + " only: narrow the filter)" : "";
      say(`${Math.min(events.length, LIVE_ROWS)} of ${events.length} event(s) of the last 10 minutes${more} ${filter}; updated ${new Date().toLocaleTimeString()}.`);
    } catch (e) {
      if (e instanceof ApiError) say(e.message); else throw e;
    }
  }
  function schedule() {
    if (timer) clearInterval(timer);
    timer = document.getElementById("live-auto").checked ? setInterval(refresh, LIVE_EVERY_MS) : null;
  }
  form.addEventListener("submit", (event) => { event.preventDefault(); refresh(); schedule(); });
  document.getElementById("live-auto").addEventListener("change", schedule);
  refresh();
  schedule();
}

// ---------------------------------------------------------------------------- funnels
const PROJECT = () => document.body.dataset.project;

function json(method, body) {
  return {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { "X-CSRF-Token": CSRF, "Content-Type": "application/json" },
  };
}

function barChart(figure, title, steps) {
  const width = 860, row = 34, left = 220, right = 150;
  const height = steps.length * row + 10;
  const max = Math.max(1, ...steps.map((s) => s.count));
  const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  steps.forEach((step, i) => {
    const y = 5 + i * row;
    const w = ((width - left - right) * step.count) / max;
    const g = el("svg:g", { class: "step", "data-step": i, "data-count": step.count });
    g.appendChild(el("svg:text", { x: left - 8, y: y + row / 2 + 4, "text-anchor": "end" }, `${i + 1}. ${step.step_label || step.event}`));
    g.appendChild(el("svg:rect", { x: left, y: y + 4, width: Math.max(w, 1), height: row - 10, fill: COLORS[0] }));
    const pct = (100 * step.overall_conv_ratio).toFixed(1);
    g.appendChild(el("svg:text", { x: left + Math.max(w, 1) + 6, y: y + row / 2 + 4 }, `${step.count} (${pct}%)`));
    svg.appendChild(g);
  });
  const block = el("div", { class: "funnel-segment", "data-segment": title });
  block.appendChild(el("h3", {}, title));
  block.appendChild(svg);
  figure.appendChild(block);
}

async function funnels() {
  const list = document.getElementById("funnel-list");
  const editor = document.getElementById("funnel-editor");
  const query = document.getElementById("funnel-query");
  const picker = query.elements.funnel_id;
  const today = new Date();
  query.elements.from_date.value = isoDay(new Date(today.getTime() - 29 * 86400000));
  query.elements.to_date.value = isoDay(today);
  let saved = [];

  async function load() {
    saved = JSON.parse(await api(`app/projects/${PROJECT()}/funnels`)).results;
    list.replaceChildren();
    picker.replaceChildren();
    for (const funnel of saved) {
      const item = el("li", {});
      item.appendChild(el("span", {}, `${funnel.name} (${funnel.steps.length} steps)`));
      const edit = el("button", { type: "button" }, "Edit");
      edit.setAttribute("aria-label", `Edit ${funnel.name}`);
      edit.addEventListener("click", () => fill(funnel));
      if (!funnel.steps.every((s) => s.event && !s.selector)) {
        edit.disabled = true; // custom events and selectors are edited through the API for now
        edit.title = "This funnel has custom events or selectors: edit it through the API";
      }
      const remove = el("button", { type: "button", class: "danger" }, "Delete");
      remove.setAttribute("aria-label", `Delete ${funnel.name}`);
      remove.addEventListener("click", async () => {
        if (!window.confirm(`Delete the funnel "${funnel.name}"?`)) return;
        await guarded(() => api(`app/projects/${PROJECT()}/funnels/${funnel.funnel_id}`, {}, json("DELETE")));
        await load();
      });
      item.append(" ", edit, " ", remove);
      list.appendChild(item);
      picker.appendChild(el("option", { value: funnel.funnel_id }, funnel.name));
    }
    if (!saved.length) list.appendChild(el("li", {}, "No saved funnels yet."));
  }

  function fill(funnel) {
    editor.elements.funnel_id.value = funnel ? funnel.funnel_id : "";
    editor.elements.name.value = funnel ? funnel.name : "";
    editor.elements.steps.value = funnel ? funnel.steps.map((s) => s.event || "").join("\n") : "";
    editor.elements.namedItem("length").value = funnel ? funnel.length : 14;
    editor.elements.length_unit.value = funnel ? funnel.length_unit : "day";
    editor.elements.name.focus();
  }

  async function guarded(call) {
    try { return await call(); } catch (e) { if (e instanceof ApiError) say(e.message); else throw e; }
  }

  editor.addEventListener("submit", async (event) => {
    event.preventDefault();
    const id = editor.elements.funnel_id.value;
    const body = {
      name: editor.elements.name.value.trim(),
      length: Number(editor.elements.namedItem("length").value),
      length_unit: editor.elements.length_unit.value,
      steps: editor.elements.steps.value.split("\n").map((s) => s.trim()).filter(Boolean).map((e) => ({ event: e })),
    };
    const path = `app/projects/${PROJECT()}/funnels` + (id ? `/${id}` : "");
    const done = await guarded(() => api(path, {}, json(id ? "PUT" : "POST", body)));
    if (done === undefined) return;
    say(id ? `Saved "${body.name}".` : `Created "${body.name}".`);
    fill(null);
    await load();
    picker.value = JSON.parse(done).results.funnel_id;
  });
  document.getElementById("funnel-new").addEventListener("click", () => fill(null));

  query.addEventListener("submit", async (event) => {
    event.preventDefault();
    const from = query.elements.from_date.value, to = query.elements.to_date.value;
    const days = Math.round((Date.parse(to) - Date.parse(from)) / 86400000) + 1;
    // one bucket over the whole range: the funnel of the period, as a bar per step
    const params = { funnel_id: picker.value, from_date: from, to_date: to, interval: Math.max(days, 1), on: query.elements.on.value.trim() };
    say("Loading…");
    const text = await guarded(() => api("query/funnels", params));
    if (text === undefined) return;
    const answer = JSON.parse(text);
    const figure = document.getElementById("funnel-chart");
    figure.replaceChildren();
    const bucket = answer.data[answer.meta.dates[0]];
    const segments = Array.isArray(bucket.steps) ? [["All users", bucket.steps]] : Object.entries(bucket);
    for (const [name, steps] of segments) barChart(figure, name === "$overall" ? "All users" : name, steps);
    say(`${segments.length} segment(s) from ${from} to ${to}.`);
  });
  await guarded(load);
}

// ---------------------------------------------------------------------------- retention
async function retention() {
  const form = document.getElementById("retention-form");
  const today = new Date();
  form.elements.from_date.value = isoDay(new Date(today.getTime() - 13 * 86400000));
  form.elements.to_date.value = isoDay(today);
  api("query/events/names", { type: "general", limit: 255 }).then((text) => {
    const list = document.getElementById("retention-names");
    for (const name of JSON.parse(text)) list.appendChild(el("option", { value: name }));
  }).catch((e) => say(e.message));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const query = Object.fromEntries(new FormData(form).entries());
    say("Loading…");
    let answer;
    try {
      answer = JSON.parse(await api("query/retention", query));
    } catch (e) {
      if (e instanceof ApiError) { say(e.message); return; } else throw e;
    }
    const dates = Object.keys(answer).sort();
    const width = Number(query.interval_count) + 1;
    const table = document.getElementById("retention-table");
    const head = el("tr", {});
    head.appendChild(el("th", { scope: "col" }, "Cohort"));
    head.appendChild(el("th", { scope: "col" }, "Users"));
    for (let i = 0; i < width; i++) head.appendChild(el("th", { scope: "col" }, `${query.unit} ${i}`));
    table.tHead.replaceChildren(head);
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const date of dates) {
      const cohort = answer[date];
      const row = el("tr", { "data-date": date, "data-first": cohort.first });
      row.appendChild(el("th", { scope: "row" }, date));
      row.appendChild(el("td", {}, String(cohort.first)));
      cohort.counts.forEach((count) => {
        const share = cohort.first ? count / cohort.first : 0;
        const cell = el("td", { "data-count": count, class: "shade" });
        cell.textContent = `${count} (${(100 * share).toFixed(1)}%)`;
        // at most 65% of the accent: dark text keeps a contrast of 5:1 or more on every shade
        cell.style.background = `rgba(31, 95, 191, ${(0.05 + 0.6 * share).toFixed(3)})`;
        row.appendChild(cell);
      });
      body.appendChild(row);
    }
    say(`${dates.length} cohort(s).`);
  });
}

// ---------------------------------------------------------------------------- profiles
const PROFILE_PAGE = 25;

function profileName(props) {
  return props.$name || [props.$first_name, props.$last_name].filter(Boolean).join(" ") || "";
}

async function profiles() {
  const form = document.getElementById("profiles-form");
  const table = document.getElementById("profiles-table");
  const pager = document.getElementById("profiles-pager");
  const detail = document.getElementById("profile-detail");
  let paging = { page: 0, session_id: "", total: 0, query: {} };

  async function show(page) {
    const params = Object.assign({}, paging.query, { page, page_size: PROFILE_PAGE });
    if (page > 0) params.session_id = paging.session_id;
    let answer;
    try {
      answer = JSON.parse(await api("query/engage", params));
    } catch (e) {
      if (e instanceof ApiError) { say(e.message); return; } else throw e;
    }
    paging = Object.assign(paging, { page: answer.page, session_id: answer.session_id, total: answer.total });
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const profile of answer.results) {
      const props = profile.$properties;
      const row = el("tr", { "data-id": profile.$distinct_id });
      const cell = el("td", {});
      const open = el("button", { type: "button", class: "link" }, profile.$distinct_id);
      open.addEventListener("click", () => openProfile(profile));
      cell.appendChild(open);
      row.appendChild(cell);
      row.appendChild(el("td", {}, profileName(props)));
      row.appendChild(el("td", {}, String(props.$email ?? "")));
      row.appendChild(el("td", {}, String(Object.keys(props).length)));
      body.appendChild(row);
    }
    const pages = Math.max(1, Math.ceil(answer.total / PROFILE_PAGE));
    pager.querySelector(".where").textContent = `Page ${answer.page + 1} of ${pages} (${answer.total} profiles)`;
    pager.querySelector(".prev").disabled = answer.page === 0;
    pager.querySelector(".next").disabled = answer.page + 1 >= pages;
    say(`${answer.total} profile(s).`);
  }

  async function openProfile(profile) {
    detail.hidden = false;
    detail.querySelector("h2").textContent = `Profile ${profile.$distinct_id}`;
    const props = detail.querySelector(".profile-props tbody");
    props.replaceChildren();
    for (const [key, value] of Object.entries(profile.$properties).sort()) {
      const row = el("tr", {});
      row.appendChild(el("th", { scope: "row" }, key));
      row.appendChild(el("td", {}, typeof value === "string" ? value : JSON.stringify(value)));
      props.appendChild(row);
    }
    const days = Number(detail.querySelector("#activity-days").value) || 30;
    const today = new Date();
    const params = {
      distinct_ids: JSON.stringify([profile.$distinct_id]),
      from_date: isoDay(new Date(today.getTime() - (days - 1) * 86400000)),
      to_date: isoDay(today),
    };
    const feed = detail.querySelector(".activity tbody");
    feed.replaceChildren();
    try {
      const events = JSON.parse(await api("query/stream/query", params)).results.events;
      events.sort((a, b) => b.properties.time - a.properties.time);
      for (const e of events) {
        const { time, distinct_id, ...rest } = e.properties;
        const row = el("tr", { "data-insert-id": rest.$insert_id ?? "" });
        row.appendChild(el("td", {}, new Date(time * 1000).toISOString().replace("T", " ").slice(0, 19)));
        row.appendChild(el("td", {}, e.event));
        row.appendChild(el("td", { class: "props" }, JSON.stringify(rest)));
        feed.appendChild(row);
      }
      detail.querySelector(".activity caption").textContent = `Activity of the last ${days} days: ${events.length} event(s), newest first`;
    } catch (e) {
      if (e instanceof ApiError) say(e.message); else throw e;
    }
    detail.querySelector("h2").focus();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = {};
    const where = form.elements.where.value.trim();
    const id = form.elements.distinct_id.value.trim();
    if (where) query.where = where;
    if (id) query.distinct_id = id;
    paging = { page: 0, session_id: "", total: 0, query };
    show(0);
  });
  pager.querySelector(".prev").addEventListener("click", () => show(paging.page - 1));
  pager.querySelector(".next").addEventListener("click", () => show(paging.page + 1));
  show(0);
}

// ---------------------------------------------------------------------------- operators
// The Prometheus text format, as /metrics writes it: [{name, labels, value}].
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const [, key, value] of (match[2] || "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[key] = value.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

function fillTable(id, header, rows) {
  const table = document.getElementById(id);
  const head = el("tr", {});
  header.forEach((h) => head.appendChild(el("th", { scope: "col" }, h)));
  table.tHead.replaceChildren(head);
  const body = table.tBodies[0];
  body.replaceChildren();
  if (!rows.length) {
    const row = el("tr", {});
    row.appendChild(el("td", { colspan: header.length }, "none in this process"));
    body.appendChild(row);
  }
  for (const cells of rows) {
    const row = el("tr", {});
    cells.forEach((c, i) => row.appendChild(el(i ? "td" : "th", i ? {} : { scope: "row" }, String(c))));
    body.appendChild(row);
  }
}

// The q-quantile of a cumulative histogram's buckets [[le, count]], by linear interpolation.
function quantile(buckets, q) {
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!total) return 0;
  let previous = [0, 0];
  for (const [le, count] of buckets) {
    if (count >= q * total) {
      if (!Number.isFinite(le)) return previous[0];
      const share = count === previous[1] ? 1 : (q * total - previous[1]) / (count - previous[1]);
      return previous[0] + share * (le - previous[0]);
    }
    previous = [le, count];
  }
  return previous[0];
}

async function operators() {
  let last = null;
  async function refresh() {
    let samples;
    try {
      samples = parseMetrics(await api("metrics", {}));
    } catch (e) {
      if (e instanceof ApiError) { say(e.message); return; } else throw e;
    }
    const of = (name) => samples.filter((s) => s.name === name);
    const now = Date.now() / 1000;
    const imported = of("footfall_events_imported_total").reduce((sum, s) => sum + s.value, 0);
    const rate = last ? Math.max(0, imported - last.imported) / (now - last.at) : null;
    last = { imported, at: now };
    fillTable("ops-ingest", ["Path", "Events accepted"], of("footfall_events_imported_total").map((s) => [s.labels.path, s.value]));
    document.getElementById("ops-rate").textContent = rate === null
      ? `${imported} events accepted since the process started.`
      : `${imported} events accepted since the process started; ${rate.toFixed(1)} events/s over the last ${Math.round(OPS_EVERY_MS / 1000)} s.`;
    fillTable("ops-rejected", ["Reason", "Path", "Events rejected"],
      of("footfall_events_rejected_total").map((s) => [s.labels.reason, s.labels.path, s.value]));
    fillTable("ops-lag", ["Topic", "Partition", "Messages behind"],
      of("footfall_consumer_lag").map((s) => [s.labels.topic, s.labels.partition, s.value]));
    const bypassed = of("footfall_dedup_redis_unavailable").some((s) => s.value > 0);
    fillTable("ops-dedup", ["Layer", "Duplicates dropped"],
      of("footfall_duplicates_dropped_total").map((s) => [s.labels.layer, s.value]));
    document.getElementById("ops-redis").textContent = bypassed
      ? "Redis is unavailable: the dedup layer is bypassed (the warehouse still deduplicates)."
      : "Redis dedup is not bypassed.";
    const endpoints = {};
    for (const s of samples) {
      if (!s.name.startsWith("footfall_query_seconds")) continue;
      const e = (endpoints[s.labels.endpoint] ||= { buckets: [], count: 0, sum: 0 });
      if (s.name.endsWith("_bucket")) e.buckets.push([s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), s.value]);
      if (s.name.endsWith("_count")) e.count = s.value;
      if (s.name.endsWith("_sum")) e.sum = s.value;
    }
    const ms = (seconds) => (1000 * seconds).toFixed(1);
    fillTable("ops-queries", ["Endpoint", "Queries", "Mean ms", "p50 ms", "p95 ms"],
      Object.entries(endpoints).sort().filter(([, e]) => e.count > 0).map(([name, e]) => {
        e.buckets.sort((a, b) => a[0] - b[0]);
        return [name, e.count, ms(e.sum / e.count), ms(quantile(e.buckets, 0.5)), ms(quantile(e.buckets, 0.95))];
      }));
    say(`Updated ${new Date().toLocaleTimeString()}.`);
  }
  await refresh();
  setInterval(refresh, OPS_EVERY_MS);
}
const OPS_EVERY_MS = 10000;

// ---------------------------------------------------------------------------- cohorts
async function cohorts() {
  const list = document.getElementById("cohort-list");
  const editor = document.getElementById("cohort-editor");
  const f = (name) => editor.elements.namedItem(name);
  let editing = null; // the cohort being edited (with its distinct_ids when static)

  async function guarded(call) {
    try { return await call(); } catch (e) { if (e instanceof ApiError || e instanceof SyntaxError) say(e.message); else throw e; }
  }

  function kind() { return editor.querySelector('input[name="kind"]:checked').value; }
  function showKind() {
    editor.querySelector(".dynamic").hidden = kind() !== "dynamic";
    editor.querySelector(".static").hidden = kind() !== "static";
  }
  editor.querySelectorAll('input[name="kind"]').forEach((r) => r.addEventListener("change", showKind));

  async function load() {
    const found = JSON.parse(await api(`app/projects/${PROJECT()}/cohorts`)).results;
    const body = list.tBodies[0];
    body.replaceChildren();
    for (const cohort of found) {
      const row = el("tr", { "data-id": cohort.id });
      row.appendChild(el("th", { scope: "row" }, cohort.name));
      row.appendChild(el("td", { class: "count" }, String(cohort.count)));
      row.appendChild(el("td", {}, cohort.is_static ? "static" : "dynamic"));
      row.appendChild(el("td", {}, cohort.description || ""));
      const actions = el("td", {});
      const edit = el("button", { type: "button", "aria-label": `Edit ${cohort.name}` }, "Edit");
      edit.addEventListener("click", () => guarded(async () => {
        fill(JSON.parse(await api(`app/projects/${PROJECT()}/cohorts/${cohort.id}`)).results);
      }));
      const remove = el("button", { type: "button", class: "danger", "aria-label": `Delete ${cohort.name}` }, "Delete");
      remove.addEventListener("click", async () => {
        if (!window.confirm(`Delete the cohort "${cohort.name}"?`)) return;
        if ((await guarded(() => api(`app/projects/${PROJECT()}/cohorts/${cohort.id}`, {}, json("DELETE")))) === undefined) return;
        say(`Deleted "${cohort.name}".`);
        await load();
      });
      actions.append(edit, " ", remove);
      row.appendChild(actions);
      body.appendChild(row);
    }
    if (!found.length) {
      const row = el("tr", {});
      row.appendChild(el("td", { colspan: 5 }, "No cohorts yet."));
      body.appendChild(row);
    }
  }

  function fill(cohort) {
    editing = cohort;
    f("name").value = cohort ? cohort.name : "";
    f("description").value = cohort ? cohort.description : "";
    editor.querySelector(`input[name="kind"][value="${cohort && cohort.is_static ? "static" : "dynamic"}"]`).checked = true;
    const selector = cohort && !cohort.is_static ? cohort.selector : "";
    f("selector").value = typeof selector === "string" ? selector : JSON.stringify(selector, null, 1);
    const behaviors = cohort && !cohort.is_static ? cohort.behaviors : null;
    f("behaviors").value = behaviors && Object.keys(behaviors).length ? JSON.stringify(behaviors, null, 1) : "";
    f("distinct_ids").value = cohort && cohort.is_static ? cohort.distinct_ids.join("\n") : "";
    editor.querySelector("h3").textContent = cohort ? `Edit "${cohort.name}"` : "New cohort";
    showKind();
    f("name").focus();
  }

  editor.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { name: f("name").value.trim(), description: f("description").value.trim() };
    const done = await guarded(async () => {
      if (kind() === "dynamic") {
        const selector = f("selector").value.trim();
        body.selector = selector.startsWith("{") ? JSON.parse(selector) : selector;
        const behaviors = f("behaviors").value.trim();
        body.behaviors = behaviors ? JSON.parse(behaviors) : {};
      } else {
        const ids = [...new Set(f("distinct_ids").value.split("\n").map((s) => s.trim()).filter(Boolean))];
        if (editing && editing.is_static) {
          body.add_distinct_ids = ids.filter((id) => !editing.distinct_ids.includes(id));
          body.remove_distinct_ids = editing.distinct_ids.filter((id) => !ids.includes(id));
        } else {
          body.distinct_ids = ids;
        }
      }
      const path = `app/projects/${PROJECT()}/cohorts` + (editing ? `/${editing.id}` : "");
      return api(path, {}, json(editing ? "PATCH" : "POST", body));
    });
    if (done === undefined) return;
    say(editing ? `Saved "${body.name}".` : `Created "${body.name}".`);
    fill(null);
    await load();
  });
  document.getElementById("cohort-new").addEventListener("click", () => fill(null));
  fill(null);
  await guarded(load);
}

// ---------------------------------------------------------------------------- insights (saved reports)
async function insights() {
  const list = document.getElementById("report-list");
  const editor = document.getElementById("report-editor");
  const f = (name) => editor.elements.namedItem(name);
  let editing = null;

  async function guarded(call) {
    try { return await call(); } catch (e) { if (e instanceof ApiError) say(e.message); else throw e; }
  }

  async function run(report) {
    const text = await guarded(() => api("query/insights", { bookmark_id: report.id }));
    if (text === undefined) return;
    const answer = JSON.parse(text);
    const keys = new Set();
    const lines = [];
    for (const [event, value] of Object.entries(answer.series)) {
      // without `on`: {date: n}; with `on`: {"$overall" | segment: {date: n}}
      const nested = Object.values(value).some((v) => typeof v === "object");
      const series = nested ? Object.entries(value).map(([seg, byDate]) => [`${event} / ${seg}`, byDate]) : [[event, value]];
      for (const [name, byDate] of series) {
        Object.keys(byDate).forEach((k) => keys.add(k));
        lines.push({ name, byDate });
      }
    }
    const dates = [...keys].sort();
    const drawn = lines.map((l) => ({ name: l.name, values: dates.map((d) => l.byDate[d] ?? 0) }));
    document.getElementById("report-title").textContent = report.name;
    lineChart(document.getElementById("chart"), dates, drawn);
    valuesTable(document.getElementById("values"), dates, drawn);
    say(`"${report.name}": ${drawn.length} line(s), ${dates.length} point(s) each.`);
  }

  async function load() {
    const found = JSON.parse(await api(`app/projects/${PROJECT()}/bookmarks`)).results;
    list.replaceChildren();
    for (const report of found) {
      const item = el("li", {});
      const open = el("button", { type: "button", class: "link" }, report.name);
      open.addEventListener("click", () => run(report));
      const edit = el("button", { type: "button", "aria-label": `Edit ${report.name}` }, "Edit");
      edit.addEventListener("click", () => fill(report));
      const remove = el("button", { type: "button", class: "danger", "aria-label": `Delete ${report.name}` }, "Delete");
      remove.addEventListener("click", async () => {
        if (!window.confirm(`Delete the report "${report.name}"?`)) return;
        if ((await guarded(() => api(`app/projects/${PROJECT()}/bookmarks/${report.id}`, {}, json("DELETE")))) === undefined) return;
        say(`Deleted "${report.name}".`);
        await load();
      });
      item.append(open, " ", edit, " ", remove);
      list.appendChild(item);
    }
    if (!found.length) list.appendChild(el("li", {}, "No saved reports yet."));
  }

  function fill(report) {
    editing = report;
    const p = report ? report.params : {};
    f("name").value = report ? report.name : "";
    f("events").value = report ? p.events.join("\n") : "";
    f("unit").value = p.unit || "day";
    f("type_of_count").value = p.type_of_count || "general";
    f("where").value = p.where || "";
    f("on").value = p.on || "";
    f("last_days").value = p.last_days || 30;
    editor.querySelector("h3").textContent = report ? `Edit "${report.name}"` : "New report";
    f("name").focus();
  }

  editor.addEventListener("submit", async (event) => {
    event.preventDefault();
    const params = {
      type: "insights",
      events: f("events").value.split("\n").map((s) => s.trim()).filter(Boolean),
      unit: f("unit").value,
      type_of_count: f("type_of_count").value,
      last_days: Number(f("last_days").value),
    };
    if (f("where").value.trim()) params.where = f("where").value.trim();
    if (f("on").value.trim()) params.on = f("on").value.trim();
    const body = { name: f("name").value.trim(), params };
    const path = `app/projects/${PROJECT()}/bookmarks` + (editing ? `/${editing.id}` : "");
    const done = await guarded(() => api(path, {}, json(editing ? "PUT" : "POST", body)));
    if (done === undefined) return;
    const saved = JSON.parse(done).results;
    fill(null);
    await load();
    await run(saved);
  });
  document.getElementById("report-new").addEventListener("click", () => fill(null));
  fill(null);
  await guarded(load);
}

const PAGES = { segmentation, live, funnels, retention, insights, profiles, cohorts, operators };
const page = PAGES[document.body.dataset.page];
if (page) page();
