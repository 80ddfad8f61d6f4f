// savepoint ui: the little JavaScript the pages use. Every page works
// without it; it adds live updates from /events (Server-Sent Events fed by
// savepointd's WatchSessions) and the Server page's live figures.
"use strict";

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function sessionRow(s) {
  const tr = document.createElement("tr");
  tr.dataset.session = s.ID;
  const a = document.createElement("a");
  a.href = "/sessions/" + encodeURIComponent(s.ID);
  a.className = "mono";
  a.textContent = s.ID;
  cell(tr, "").appendChild(a);
  cell(tr, s.State, "state state-" + s.State.replace(" ", "-"));
  cell(tr, s.Task, "wide");
  for (const k of ["Turn", "Revision", "Epoch", "Pending", "InDoubt", "Resolved", "Awaiting"]) cell(tr, String(s[k]));
  cell(tr, s.Created, "wide");
  cell(tr, s.Updated);
  cell(tr, s.Labels, "wide");
  return tr;
}

function liveSessions(table) {
  const live = document.getElementById("live");
  const body = table.tBodies[0];
  const lastPage = table.dataset.lastPage === "true";
  const es = new EventSource(table.dataset.events);
  let connected = false;
  es.addEventListener("changed", (e) => {
    const s = JSON.parse(e.data);
    const tr = sessionRow(s);
    const old = body.querySelector('tr[data-session="' + CSS.escape(s.ID) + '"]');
    if (table.dataset.order === "updated") {
      // Last update first: a changed session moves to the top.
      if (old) old.remove();
      body.querySelectorAll("tr:not([data-session])").forEach((r) => r.remove());
      body.insertBefore(tr, body.firstChild);
    } else if (old) {
      old.replaceWith(tr);
    } else {
      const rows = [...body.querySelectorAll("tr[data-session]")];
      const after = rows.find((r) => r.dataset.session > s.ID);
      if (!after && !lastPage) return; // it belongs on a later page
      body.querySelectorAll("tr:not([data-session])").forEach((r) => r.remove());
      body.insertBefore(tr, after || null);
    }
    tr.classList.add("changed");
    live.textContent = "Session " + s.ID + " changed: revision " + s.Revision + ", " + s.State + ".";
  });
  es.addEventListener("removed", (e) => {
    const id = JSON.parse(e.data).id;
    const old = body.querySelector('tr[data-session="' + CSS.escape(id) + '"]');
    if (old) {
      old.remove();
      live.textContent = "Session " + id + " left this list.";
    }
  });
  es.addEventListener("resync", () => location.reload());
  es.addEventListener("heartbeat", () => {
    if (!connected) live.textContent = "Live: new and changed sessions appear here.";
    connected = true;
  });
  es.addEventListener("unavailable", (e) => {
    connected = false;
    live.textContent = "Live updates paused: " + JSON.parse(e.data).message;
  });
}

function liveSession(el) {
  const es = new EventSource(el.dataset.events);
  const id = el.dataset.session;
  es.addEventListener("changed", (e) => {
    const s = JSON.parse(e.data);
    if (s.ID !== id || String(s.Revision) === el.dataset.revision && String(s.Epoch) === el.dataset.epoch) return;
    el.hidden = false;
    el.querySelector("span").textContent = "This session changed: revision " + s.Revision + ", epoch " + s.Epoch + ", " + s.State + ".";
  });
  es.addEventListener("heartbeat", () => { el.dataset.connected = "true"; });
  es.addEventListener("unavailable", () => { el.dataset.connected = "false"; });
  es.addEventListener("removed", (e) => {
    if (JSON.parse(e.data).id !== id) return;
    el.hidden = false;
    el.querySelector("span").textContent = "This session was deleted, or no longer exists.";
  });
}

function liveFigures(dl) {
  const tick = async () => {
    try {
      const r = await fetch(dl.dataset.live, { credentials: "same-origin" });
      const f = await r.json();
      for (const dd of dl.querySelectorAll("[data-figure]")) {
        if (f[dd.dataset.figure] !== undefined) dd.textContent = f[dd.dataset.figure];
      }
      if (f.error) document.getElementById("live").textContent = "savepointd: " + f.error;
    } catch (err) {
      document.getElementById("live").textContent = "The inspector is not answering.";
    }
  };
  setInterval(tick, 5000);
  tick();
}

document.addEventListener("DOMContentLoaded", () => {
  const table = document.querySelector("table[data-events]");
  if (table) liveSessions(table);
  const banner = document.getElementById("session-live");
  if (banner) liveSession(banner);
  const dl = document.querySelector("dl[data-live]");
  if (dl) liveFigures(dl);
});
