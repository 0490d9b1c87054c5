// The console's only script: it refreshes the overview's figures from /console/overview.json every two
// seconds and turns two samples of the counters into per-second rates. Every other page works without it.
(function () {
  "use strict";
  var box = document.getElementById("figures");
  if (!box) { return; }
  var url = box.getAttribute("data-source");
  var last = null;
  function set(id, v) {
    var el = document.getElementById(id);
    if (el) { el.textContent = v; }
  }
  function fmt(n, digits) { return Number(n).toFixed(digits); }
  function refusals(f, prev) {
    var body = document.querySelector("#refusals tbody");
    if (!body) { return; }
    var reasons = Object.keys(f.refusals || {}).sort(function (a, b) { return f.refusals[b] - f.refusals[a]; });
    while (body.firstChild) { body.removeChild(body.firstChild); }
    if (reasons.length === 0) {
      var tr0 = document.createElement("tr"); tr0.className = "empty";
      var td0 = document.createElement("td"); td0.colSpan = 3; td0.textContent = "No refusals.";
      tr0.appendChild(td0); body.appendChild(tr0);
      return;
    }
    reasons.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-reason", r);
      var rate = "—";
      if (prev && prev.refusals && f.at > prev.at) {
        rate = fmt((f.refusals[r] - (prev.refusals[r] || 0)) * 1000 / (f.at - prev.at), 1);
      }
      [r, String(f.refusals[r]), rate].forEach(function (text, i) {
        var td = document.createElement("td");
        if (i > 0) { td.className = "n"; }
        td.textContent = text;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }
  function show(f) {
    set("sampled", new Date(f.at).toISOString());
    set("f-acks", f.acks);
    if (last && f.at > last.at) { set("f-acks-rate", fmt((f.acks - last.acks) * 1000 / (f.at - last.at), 1)); }
    set("f-backlog", f.pending);
    set("f-scheduled", f.scheduled);
    set("f-inflight", f.inflight);
    set("f-oldest", fmt(f.oldest_due_age_seconds, 1));
    set("f-breakers", f.breakers_open);
    set("f-dead", f.dead);
    set("f-quarantined", f.quarantined);
    set("f-store", f.store || "—");
    set("f-ready", String(f.ready));
    set("f-backup-age", f.backup_age_seconds === undefined ? "—" : fmt(f.backup_age_seconds, 0));
    set("f-backup-failures", f.backup_failures);
    refusals(f, last);
    last = f;
  }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.json(); })
      .then(show)
      .catch(function () { set("sampled", "not refreshed: the node did not answer"); })
      .then(function () { window.setTimeout(poll, 2000); });
  }
  poll();
}());
