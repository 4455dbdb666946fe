// purrfly dashboard: the fleet as the balancer's admin API (/v1) shows it,
// live from /v1/events. No framework, no CDN: everything is in this file.
// The admin key lives in sessionStorage (this tab only) and travels in the
// Authorization header; it never appears in a URL, which is why the event
// stream is read with fetch() rather than EventSource (which cannot send
// headers). Data is written with textContent only, never as HTML.
"use strict";

const KEY = "purrfly.adminKey";
const HOUR = 3600 * 1000;
const state = { key: sessionStorage.getItem(KEY) || "", samples: [], stream: null, streamGen: 0, refreshTimer: 0, confirmClose: "" };
const $ = (id) => document.getElementById(id);

function setStatus(text) { $("conn").textContent = text; }

async function api(path, opts = {}) {
  const res = await fetch(path, {
    ...opts,
    headers: { Authorization: "Bearer " + state.key, ...(opts.headers || {}) },
    cache: "no-store",
  });
  if (res.status === 401) {
    signOut("The admin key was refused: sign in again.");
    throw new Error("unauthorized");
  }
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
  if (!res.ok) {
    const msg = body && body.error ? body.error : res.status + " " + res.statusText;
    throw new Error(msg);
  }
  return body;
}

function signOut(message) {
  state.key = "";
  sessionStorage.removeItem(KEY);
  if (state.stream) { state.stream.abort(); state.stream = null; }
  $("fleet").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setStatus("signed out");
}

async function signIn(key) {
  state.key = key;
  try {
    await api("/v1/stats");
  } catch (e) {
    if (state.key) signOut("Sign-in failed: " + e.message);
    return;
  }
  sessionStorage.setItem(KEY, key);
  try {
    // The last hour as the balancer sampled it, a point a minute.
    const hist = await api("/v1/stats/history");
    state.samples = ((hist && hist.samples) || []).map((h) => ({ t: Date.parse(h.at), players: Number(h.players) || 0, rooms: Number(h.rooms) || 0 }));
  } catch (e) {
    state.samples = [];
  }
  $("login").hidden = true;
  $("fleet").hidden = false;
  $("logout").hidden = false;
  $("login-error").textContent = "";
  await refresh();
  follow();
}

// ---- rendering ----

function cell(tr, col, text, cls) {
  const td = document.createElement("td");
  td.dataset.col = col;
  td.textContent = text === undefined || text === null || text === "" ? "-" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function button(label, aria, onClick, cls) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.setAttribute("aria-label", aria);
  if (cls) b.className = cls;
  b.addEventListener("click", onClick);
  return b;
}

function renderStats(s) {
  if (!s) return;
  for (const dd of document.querySelectorAll("[data-stat]")) {
    const v = s[dd.dataset.stat];
    dd.textContent = Array.isArray(v) ? String(v.length) : v === undefined ? "-" : String(v);
  }
}

// fillTable replaces a table's rows, one per item (row(tr, item) fills
// it), and shows its "empty" line when there are none.
function fillTable(table, empty, list, row) {
  const tbody = $(table).tBodies[0];
  tbody.replaceChildren();
  $(empty).hidden = list.length > 0;
  for (const item of list) {
    const tr = document.createElement("tr");
    row(tr, item);
    tbody.appendChild(tr);
  }
}

// actions is the last cell of a row, emptied for its buttons.
function actions(tr) {
  const td = cell(tr, "Actions", "");
  td.textContent = "";
  return td;
}

// renderRelays shows the relays that take (or may take) rooms in one
// table and the retiring ones, replaced by a deploy, apart with their
// latest stop.
function renderRelays(all) {
  const list = all.filter((r) => r.status !== "retiring");
  const retiring = all.filter((r) => r.status === "retiring");
  $("retiring-section").hidden = retiring.length === 0;
  fillTable("retiring", "retiring-empty", retiring, (tr, r) => {
    tr.dataset.boot = r.bootId;
    cell(tr, "Region", r.region);
    cell(tr, "Machine", r.machineId);
    cell(tr, "Boot", (r.bootId || "").slice(0, 12));
    cell(tr, "Image", r.image);
    cell(tr, "Rooms", r.rooms);
    cell(tr, "Players", r.connections !== undefined ? r.connections : r.players);
    const by = r.retireBy ? new Date(r.retireBy) : null;
    const td = cell(tr, "Latest stop", by && !isNaN(by) ? by.toISOString().replace(".000Z", "Z") : "", "retire-by");
    if (by && !isNaN(by)) td.title = by.toLocaleString();
  });
  fillTable("relays", "relays-empty", list, (tr, r) => {
    tr.dataset.boot = r.bootId;
    cell(tr, "Region", r.region);
    cell(tr, "Machine", r.machineId);
    cell(tr, "Boot", (r.bootId || "").slice(0, 12)).title = r.bootId || "";
    cell(tr, "Image", r.image);
    cell(tr, "Status", r.status, "status status-" + r.status);
    cell(tr, "Rooms", r.rooms);
    cell(tr, "Players", r.connections !== undefined ? r.connections : r.players);
    const td = actions(tr);
    const who = r.machineId || r.bootId;
    if (r.status === "draining") {
      td.appendChild(button("Undrain", "Undrain relay " + who, () => act("POST", "/v1/instances/" + encodeURIComponent(r.bootId) + "/undrain")));
    } else {
      td.appendChild(button("Drain", "Drain relay " + who, () => act("POST", "/v1/instances/" + encodeURIComponent(r.bootId) + "/drain"), "danger"));
    }
  });
}

function renderRooms(list) {
  fillTable("rooms", "rooms-empty", list, (tr, r) => {
    tr.dataset.room = r.name;
    cell(tr, "Name", r.name);
    cell(tr, "Region", r.region);
    const boot = r.bootId || r.instance || "";
    cell(tr, "Relay", r.machineId || boot.slice(0, 12)).title = boot ? "boot " + boot + (r.machineId ? ", machine " + r.machineId : "") : "";
    cell(tr, "Phase", r.phase);
    cell(tr, "Players", r.players !== undefined ? r.players : r.connections);
    const td = actions(tr);
    const confirming = state.confirmClose === r.name;
    td.appendChild(button(confirming ? "Confirm close" : "Close", "Close room " + r.name, () => {
      if (state.confirmClose !== r.name) {
        state.confirmClose = r.name;
        renderRooms(list);
        return;
      }
      state.confirmClose = "";
      act("DELETE", "/v1/rooms/" + encodeURIComponent(r.name));
    }, "danger"));
  });
}

// renderChart draws the samples in CSS pixels: its viewBox is the box the
// page gives it, so labels keep their size on a phone. The time axis runs
// from the oldest sample (at least five minutes back, at most an hour) to
// now, so a few minutes of data fill the width.
function renderChart() {
  const svg = $("chart");
  const now = Date.now();
  state.samples = state.samples.filter((p) => now - p.t <= HOUR);
  const pts = state.samples;
  const W = Math.max(240, Math.round(svg.getBoundingClientRect().width) || 600);
  const H = W < 480 ? 170 : 200;
  const PL = 12, PR = 12, PT = 22, PB = 26;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const span = Math.min(HOUR, Math.max(5 * 60 * 1000, pts.length ? now - pts[0].t : 0));
  const max = Math.max(1, ...pts.map((p) => Math.max(p.players, p.rooms)));
  const x = (t) => PL + ((t - (now - span)) / span) * (W - PL - PR);
  const y = (v) => H - PB - (v / max) * (H - PT - PB);
  const ns = "http://www.w3.org/2000/svg";
  const el = (name, attrs, text) => {
    const e = document.createElementNS(ns, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  svg.replaceChildren();
  el("line", { class: "grid", x1: PL, x2: W - PR, y1: y(0), y2: y(0) });
  el("line", { class: "grid", x1: PL, x2: W - PR, y1: y(max), y2: y(max) });
  for (const k of ["players", "rooms"]) {
    el("polyline", { class: k, points: pts.map((p) => x(p.t).toFixed(1) + "," + y(p[k]).toFixed(1)).join(" ") });
  }
  const mins = Math.round(span / 60000);
  el("text", { x: PL, y: PT - 6 }, String(max));
  el("text", { x: PL, y: H - 8 }, "-" + mins + " min");
  el("text", { x: W - PR, y: H - 8, "text-anchor": "end" }, "now");
  svg.dataset.points = String(pts.length);
  svg.dataset.spanMinutes = String(mins);
}

function sample(s) {
  if (!s) return;
  state.samples.push({ t: Date.now(), players: Number(s.players) || 0, rooms: Number(s.rooms) || 0 });
  renderChart();
}

// ---- data ----

function roomQuery() {
  const q = new URLSearchParams();
  for (const el of $("filters").elements) {
    if (el.name && el.value.trim()) q.set(el.name, el.value.trim());
  }
  const s = q.toString();
  return "/v1/rooms" + (s ? "?" + s : "");
}

// refresh reloads the totals, the relays and the rooms. A filter the
// balancer refuses is said beside the filters and empties the rooms table
// (showing unfiltered rows under a filter would mislead); the rest of the
// page still loads.
async function refresh() {
  const rooms = api(roomQuery()).then((r) => ({ ok: r }), (e) => ({ err: e }));
  try {
    const [stats, inst] = await Promise.all([api("/v1/stats"), api("/v1/instances")]);
    renderStats(stats);
    sample(stats);
    renderRelays((inst && inst.instances) || []);
    $("load-error").textContent = "";
  } catch (e) {
    if (state.key) $("load-error").textContent = "Could not load the fleet: " + e.message;
  }
  const r = await rooms;
  if (r.err) {
    if (!state.key) return;
    $("filter-error").textContent = "The rooms could not be listed: " + r.err.message;
    fillTable("rooms", "rooms-empty", [], () => {});
    $("rooms-empty").hidden = true;
    $("rooms-count").textContent = "";
    return;
  }
  $("filter-error").textContent = "";
  const list = (r.ok && r.ok.rooms) || [];
  renderRooms(list);
  const total = r.ok && r.ok.total !== undefined ? r.ok.total : list.length;
  $("rooms-count").textContent = total > list.length ? "Showing " + list.length + " of " + total + " rooms: filter to narrow them." : "";
}

function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => { state.refreshTimer = 0; refresh(); }, 300);
}

// act calls the admin API for an operator's action. Its failure stays on
// screen, whatever refreshes follow, until the operator dismisses it.
async function act(method, path) {
  try {
    await api(path, { method });
  } catch (e) {
    showActionError(method + " " + path + ": " + e.message);
  }
  await refresh();
}

function showActionError(text) {
  $("action-error").querySelector("span").textContent = text;
  $("action-error").hidden = false;
}

// follow reads /v1/events (Server-Sent Events) and refreshes on every
// event; it reconnects with a doubling delay, at most 30 s.
async function follow() {
  // One loop at a time: a sign-out and a quick sign-in start a new one,
  // and the old one stops at its next turn.
  const gen = ++state.streamGen;
  let delay = 1000;
  while (state.key && gen === state.streamGen) {
    const ctl = new AbortController();
    state.stream = ctl;
    try {
      const res = await fetch("/v1/events", { headers: { Authorization: "Bearer " + state.key }, signal: ctl.signal, cache: "no-store" });
      if (res.status === 401) { signOut("The admin key was refused: sign in again."); return; }
      if (!res.ok || !res.body) throw new Error(res.status + " " + res.statusText);
      setStatus("live");
      delay = 1000;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          handle(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
        if (buf.length > 1 << 20) buf = ""; // a runaway event: drop it
      }
    } catch (e) {
      if (!state.key || gen !== state.streamGen) return;
    }
    if (gen !== state.streamGen) return;
    setStatus("reconnecting…");
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 30000);
  }
}

function handle(block) {
  let type = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue; // a ping comment
    if (line.startsWith("event:")) type = line.slice(6).trim();
    else if (line.startsWith("data:")) data += line.slice(5).trim();
  }
  if (!data && type === "message") return;
  if (type === "stats") {
    try {
      const ev = JSON.parse(data);
      const s = ev && ev.stats ? ev.stats : ev; // the event carries its stats
      renderStats(s);
      sample(s);
    } catch (e) { /* ignore a malformed event */ }
    return;
  }
  scheduleRefresh();
}

// ---- wiring ----

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = $("key").value.trim();
    $("key").value = "";
    signIn(key);
  });
  // Only now that this script takes the submit is the form shown: until
  // then it is hidden (and a POST), so no premature submit puts the key
  // in a URL.
  $("login-wait").hidden = true;
  $("login-form").hidden = false;
  $("logout").addEventListener("click", () => signOut(""));
  $("filters").addEventListener("submit", (ev) => { ev.preventDefault(); refresh(); });
  $("action-dismiss").addEventListener("click", () => { $("action-error").hidden = true; });
  window.addEventListener("resize", renderChart);
  renderChart();
  if (state.key) signIn(state.key);
});
