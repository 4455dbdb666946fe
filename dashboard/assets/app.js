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

function renderRelays(list) {
  fillTable("relays", "relays-empty", list, (tr, r) => {
    tr.dataset.boot = r.bootId;
    cell(tr, "Region", r.region);
    cell(tr, "Machine", r.machineId);
    cell(tr, "Boot", (r.bootId || "").slice(0, 12));
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
    cell(tr, "Relay", r.machineId || (r.instance || r.bootId || "").slice(0, 12));
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

function renderChart() {
  const svg = $("chart");
  const now = Date.now();
  state.samples = state.samples.filter((p) => now - p.t <= HOUR);
  const pts = state.samples;
  const W = 600, H = 160, P = 24;
  const max = Math.max(1, ...pts.map((p) => Math.max(p.players, p.rooms)));
  const x = (t) => P + ((t - (now - HOUR)) / HOUR) * (W - 2 * P);
  const y = (v) => H - P - (v / max) * (H - 2 * P);
  const line = (k) => pts.map((p) => x(p.t).toFixed(1) + "," + y(p[k]).toFixed(1)).join(" ");
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  for (const [k, cls] of [["players", "players"], ["rooms", "rooms"]]) {
    const pl = document.createElementNS(ns, "polyline");
    pl.setAttribute("class", cls);
    pl.setAttribute("points", line(k));
    svg.appendChild(pl);
  }
  for (const [tx, ty, s] of [[P, 14, String(max)], [P, H - 6, "-60 min"], [W - P - 20, H - 6, "now"]]) {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", tx); t.setAttribute("y", ty); t.textContent = s;
    svg.appendChild(t);
  }
  svg.dataset.points = String(pts.length);
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

async function refresh() {
  try {
    const [stats, inst, rooms] = await Promise.all([api("/v1/stats"), api("/v1/instances"), api(roomQuery())]);
    renderStats(stats);
    sample(stats);
    renderRelays((inst && inst.instances) || []);
    renderRooms((rooms && rooms.rooms) || []);
    const shown = ((rooms && rooms.rooms) || []).length, total = rooms && rooms.total !== undefined ? rooms.total : shown;
    $("rooms-count").textContent = total > shown ? "Showing " + shown + " of " + total + " rooms: filter to narrow them." : "";
    $("action-error").textContent = "";
  } catch (e) {
    if (state.key) $("action-error").textContent = "Could not load the fleet: " + e.message;
  }
}

function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => { state.refreshTimer = 0; refresh(); }, 300);
}

async function act(method, path) {
  try {
    await api(path, { method });
    $("action-error").textContent = "";
  } catch (e) {
    $("action-error").textContent = method + " " + path + ": " + e.message;
  }
  await refresh();
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
  $("logout").addEventListener("click", () => signOut(""));
  $("filters").addEventListener("submit", (ev) => { ev.preventDefault(); refresh(); });
  renderChart();
  if (state.key) signIn(state.key);
});
