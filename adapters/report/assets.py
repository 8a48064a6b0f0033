"""The report's stylesheet and script, inlined into every page.

Kept as Python strings rather than package data: the page must carry them inline anyway (one
self-contained file), the script's CSP hash is computed from the very string that is written,
and a wheel or a non-editable install cannot lose them.

The script opens a sample's ``<details>`` when a link targets it, and runs the sample explorer
from the JSON in ``#explorer-data``. It builds every cell with ``textContent`` (never
``innerHTML``), so no text from the data is parsed as markup.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["CSS", "JS", "script_hash"]

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; padding: 0 1.5rem 3rem; background: #fafbfc; color: #1d232b;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  "Noto Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; }
header { border-bottom: 2px solid #d6dde5; padding: 1.2rem 0 0.6rem; margin-bottom: 1rem; }
h1 { font-size: 1.7rem; margin: 0 0 0.3rem; }
h2 { font-size: 1.3rem; margin: 2rem 0 0.6rem; border-bottom: 1px solid #d6dde5; }
h3 { font-size: 1.05rem; margin: 1.2rem 0 0.4rem; }
nav a { margin-right: 1rem; }
a { color: #1f5f9e; }
.muted { color: #5d6875; }
.note { background: #fff7e0; border-left: 4px solid #e0b040; padding: 0.4rem 0.8rem; }
.warnings { background: #fde8e6; border-left: 4px solid #b23030; padding: 0.4rem 0.8rem;
  margin: 0.6rem 0; }
.warnings ul { margin: 0.2rem 0 0; padding-left: 1.2rem; }
table { border-collapse: collapse; margin: 0.4rem 0 1rem; background: #fff; font-size: 0.92rem; }
th, td { border: 1px solid #d6dde5; padding: 0.3rem 0.55rem; text-align: left;
  vertical-align: top; }
th { background: #eef2f6; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td.value { color: #a12a2a; }
tr.skipped td.value { color: #6b7a8f; }
.meta dt { font-weight: 600; float: left; clear: left; width: 13rem; }
.meta dd { margin: 0 0 0.2rem 13rem; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-start; }
figure { margin: 0; background: #fff; border: 1px solid #d6dde5; padding: 0.5rem; }
figcaption { font-size: 0.85rem; color: #3d4753; }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; fill: #3d4753; }
.legend span { display: inline-block; margin-right: 1rem; font-size: 0.85rem; }
.swatch { display: inline-block; width: 0.8rem; height: 0.8rem; margin-right: 0.3rem;
  vertical-align: middle; }
details.sample { background: #fff; border: 1px solid #d6dde5; margin: 0.4rem 0;
  padding: 0.3rem 0.8rem; }
details.sample > summary { cursor: pointer; font-weight: 600; }
details.sample[open] { border-color: #8aa5c2; }
details.sample:target { outline: 3px solid #e0b040; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0.2rem 0 0.6rem;
  background: #f4f6f8; padding: 0.4rem 0.6rem; border-radius: 3px; }
.ok { color: #25794a; font-weight: 700; }
.bad { color: #b23030; font-weight: 700; }
.danger { background: #fde8e6; }
.tag { display: inline-block; padding: 0 0.4rem; border-radius: 3px; font-size: 0.8rem;
  background: #eef2f6; }
.tag.rel { background: #dcf1e3; }
.tag.nonrel { background: #f6e0de; }
details.sample > summary .q { font-weight: 400; color: #3d4753; margin-left: 0.5rem; }
.other-runs { margin: 0.3rem 0; }
ol.conversation { padding-left: 1.6rem; margin: 0.2rem 0 0.6rem; }
ol.conversation .turn-user .text { background: #eaf1fa; }
ol.trajectory { padding-left: 1.6rem; margin: 0.2rem 0 0.6rem; }
ol.step-contexts { font-size: 0.85rem; margin: 0 0 0.4rem; }
.bad-text { color: #b23030; }
.tools { display: flex; flex-wrap: wrap; gap: 0.4rem 1rem; align-items: center;
  margin: 0.4rem 0; font-size: 0.9rem; }
.tools input, .tools select, .tools button { font: inherit; }
.tools input[type="number"] { width: 5rem; }
.table-scroll { overflow-x: auto; }
table.explorer th { padding: 0; }
table.explorer th button { all: unset; display: block; cursor: pointer; padding: 0.3rem 0.55rem;
  width: 100%; box-sizing: border-box; white-space: normal; }
table.explorer th button:focus-visible { outline: 2px solid #1f5f9e; }
table.explorer th[aria-sort="ascending"] button::after { content: " ▲"; font-size: 0.7rem; }
table.explorer th[aria-sort="descending"] button::after { content: " ▼"; font-size: 0.7rem; }
table.explorer tbody tr { cursor: pointer; }
table.explorer tbody tr:hover td { background: #f1f6fb; }
td.ex-q { max-width: 30rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
table.explorer.many td.ex-q { max-width: 16rem; }
table.explorer td.failed { color: #a12a2a; }
table.explorer td.skipped, table.explorer td.absent { color: #6b7a8f; }
a.per-question { white-space: nowrap; }
.better { color: #25794a; font-weight: 600; }
.worse { color: #b23030; font-weight: 600; }
svg text.qcount { font-weight: 700; fill: #1d232b; }
svg .run-pt { cursor: default; }
@media print { details.sample { break-inside: avoid; } .tools { display: none; } }
"""

JS = """
(function () {
  "use strict";
  function byId(id) { return document.getElementById(id); }

  // A link to a sample (chart point, table row, URL) opens its <details>.
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (!id) { return; }
    var el = byId(id);
    if (el && el.tagName === "DETAILS") { el.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  var tools = byId("sample-tools");
  if (tools) { tools.hidden = false; }
  function setAll(open) {
    var items = document.querySelectorAll("details.sample");
    for (var i = 0; i < items.length; i++) { items[i].open = open; }
  }
  var all = byId("expand-all");
  var none = byId("collapse-all");
  if (all) { all.addEventListener("click", function () { setAll(true); }); }
  if (none) { none.addEventListener("click", function () { setAll(false); }); }

  var holder = byId("explorer-data");
  if (holder) { explorer(JSON.parse(holder.textContent)); }

  // The sample table. Every cell is filled with textContent: no data is parsed as markup.
  function explorer(data) {
    var table = byId("ex-table");
    var head = table.tHead;
    var body = table.tBodies[0];
    var view = byId("ex-view");
    var metricSel = byId("ex-metric");
    var search = byId("ex-search");
    var status = byId("ex-status");
    var rangeCol = byId("ex-range-col");
    var low = byId("ex-min");
    var high = byId("ex-max");
    var count = byId("ex-count");
    var form = byId("explorer-tools");
    var lowerBetter = {};
    data.lowerBetter.forEach(function (m) { lowerBetter[m] = true; });
    var columns = [];
    var rows = [];
    var sortCol = -1;
    var sortDir = 1;

    byId("explorer-nojs").hidden = true;
    form.hidden = false;
    data.pipelines.forEach(function (name, i) {
      view.add(new Option(name + ": every metric", "run:" + i));
    });
    data.pairs.forEach(function (pair, i) {
      view.add(new Option(pair.b + " vs " + pair.a + ", per question", "pair:" + i));
    });
    if (data.pipelines.length < 2) { byId("ex-view-label").hidden = true; }
    if (data.pairs.length) { view.value = "pair:0"; }

    function currentView() {
      var parts = view.value.split(":");
      var i = Number(parts[1]);
      if (parts[0] === "pair") {
        var pair = data.pairs[i];
        return { kind: "pair", a: pair.a, b: pair.b, metric: pair.metric };
      }
      return { kind: "run", name: data.pipelines[i] };
    }

    function fillMetrics() {
      var v = currentView();
      var label = byId("ex-metric-label");
      byId("ex-changed").disabled = v.kind !== "pair";
      if (v.kind !== "pair" && status.value === "changed") { status.value = "all"; }
      if (v.kind !== "pair") { label.hidden = true; return; }
      label.hidden = false;
      var keep = metricSel.value;
      var names = data.metrics[v.a].slice();
      data.metrics[v.b].forEach(function (m) { if (names.indexOf(m) < 0) { names.push(m); } });
      while (metricSel.options.length) { metricSel.remove(0); }
      names.forEach(function (m) { metricSel.add(new Option(m, m)); });
      if (names.indexOf(keep) >= 0) {
        metricSel.value = keep;
      } else if (v.metric && names.indexOf(v.metric) >= 0) {
        metricSel.value = v.metric;
      }
    }

    function cellOf(row, run, metric) {
      var r = row.runs[run];
      if (!r) { return null; }
      var k = data.metrics[run].indexOf(metric);
      return k < 0 ? null : r.cells[k];
    }

    function build() {
      var v = currentView();
      columns = [{ key: "id", label: "Id", kind: "id" }];
      if (data.hasQuestions) { columns.push({ key: "question", label: "Question", kind: "q" }); }
      var members;
      if (v.kind === "run") {
        data.metrics[v.name].forEach(function (m) {
          columns.push({ key: m, label: m, kind: "num", metric: m, run: v.name });
        });
        members = data.rows.filter(function (r) { return r.runs[v.name]; });
      } else {
        var m = metricSel.value;
        columns.push({ key: "a", label: v.a, kind: "num", metric: m, run: v.a });
        columns.push({ key: "b", label: v.b, kind: "num", metric: m, run: v.b });
        columns.push({
          key: "diff", label: "diff (" + v.b + " − " + v.a + ")", kind: "diff", metric: m
        });
        members = data.rows.filter(function (r) { return r.runs[v.a] || r.runs[v.b]; });
      }
      rows = members.map(function (r, i) { return makeRow(r, i, v); });
      var keep = rangeCol.value;
      while (rangeCol.options.length) { rangeCol.remove(0); }
      rangeCol.add(new Option("(choose a column)", ""));
      columns.forEach(function (c, i) {
        if (c.kind === "num" || c.kind === "diff") { rangeCol.add(new Option(c.label, String(i))); }
      });
      rangeCol.value = Array.prototype.some.call(rangeCol.options, function (o) {
        return o.value === keep;
      }) ? keep : "";
      if (sortCol >= columns.length) { sortCol = -1; }
      table.className = columns.length > 7 ? "explorer many" : "explorer";
      drawHead();
      apply();
    }

    function makeRow(r, i, v) {
      var values = columns.map(function (c) {
        if (c.kind === "id") { return r.id; }
        if (c.kind === "q") { return r.q || ""; }
        if (c.kind === "num") { return cellOf(r, c.run, c.metric); }
        var a = cellOf(r, v.a, c.metric);
        var b = cellOf(r, v.b, c.metric);
        return typeof a === "number" && typeof b === "number" ? b - a : null;
      });
      var first = v.kind === "run" ? r.runs[v.name] : (r.runs[v.a] || r.runs[v.b]);
      var second = v.kind === "pair" && r.runs[v.a] && r.runs[v.b] ? r.runs[v.b].anchor : null;
      var tr = document.createElement("tr");
      tr.setAttribute("data-sample", r.id);
      columns.forEach(function (c, k) { tr.appendChild(makeCell(c, values[k], first.anchor)); });
      var text = [r.id, r.q || ""].concat(r.answers).join(" | ").toLowerCase();
      return { tr: tr, values: values, text: text, order: i, anchor: first.anchor, also: second };
    }

    function makeCell(c, value, anchor) {
      var td = document.createElement("td");
      td.setAttribute("data-column", c.key);
      if (c.kind === "id") {
        var a = document.createElement("a");
        a.href = "#" + anchor;
        a.textContent = value;
        td.appendChild(a);
        return td;
      }
      if (c.kind === "q") {
        td.className = "ex-q";
        td.textContent = value;
        td.title = value;
        return td;
      }
      td.className = "num";
      if (typeof value === "number") {
        if (c.kind === "diff") {
          td.textContent = (value >= 0 ? "+" : "") + value.toFixed(3);
          var good = lowerBetter[c.metric] ? value < 0 : value > 0;
          if (Math.abs(value) > 1e-9) { td.className += good ? " better" : " worse"; }
        } else {
          td.textContent = value.toFixed(3);
        }
        td.title = String(value);
        td.setAttribute("data-value", String(value));
      } else if (typeof value === "string") {
        td.textContent = value.indexOf("failed") === 0 ? "failed" : value;
        td.title = value;
        td.className += value.indexOf("failed") === 0 ? " failed" : " skipped";
      } else {
        td.textContent = "—";
        td.title = c.kind === "diff" ? "not scored in both runs" : "not scored";
        td.className += " absent";
      }
      return td;
    }

    function drawHead() {
      while (head.firstChild) { head.removeChild(head.firstChild); }
      var tr = document.createElement("tr");
      columns.forEach(function (c, i) {
        var th = document.createElement("th");
        if (c.kind !== "id" && c.kind !== "q") { th.className = "num"; }
        th.setAttribute("scope", "col");
        th.setAttribute("data-column", c.key);
        th.setAttribute("aria-sort", i === sortCol ? (sortDir > 0 ? "ascending" : "descending")
          : "none");
        var button = document.createElement("button");
        button.type = "button";
        // a break opportunity after "_" and ":" lets long metric names wrap
        button.textContent = c.label.replace(/([_:])/g, "$1" + String.fromCharCode(8203));
        button.title = "sort by " + c.label;
        button.addEventListener("click", function () {
          if (sortCol === i) { sortDir = -sortDir; } else { sortCol = i; sortDir = 1; }
          drawHead();
          apply();
        });
        th.appendChild(button);
        tr.appendChild(th);
      });
      head.appendChild(tr);
    }

    function compareRows(x, y) {
      if (sortCol < 0) { return x.order - y.order; }
      var a = x.values[sortCol];
      var b = y.values[sortCol];
      var kind = columns[sortCol].kind;
      var result;
      if (kind === "id" || kind === "q") {
        result = sortDir * String(a).localeCompare(String(b), undefined, { numeric: true });
      } else {
        var an = typeof a === "number";
        var bn = typeof b === "number";
        if (!an || !bn) { return an === bn ? x.order - y.order : (an ? -1 : 1); }
        result = sortDir * (a - b);
      }
      return result || x.order - y.order;
    }

    function keep(row) {
      var needle = search.value.trim().toLowerCase();
      if (needle && row.text.indexOf(needle) < 0) { return false; }
      var cells = row.values.filter(function (v, i) { return columns[i].kind === "num"; });
      var want = status.value;
      if (want === "failed" && !cells.some(function (v) {
        return typeof v === "string" && v.indexOf("failed") === 0;
      })) { return false; }
      if (want === "skipped" && cells.indexOf("skipped") < 0) { return false; }
      if (want === "scored" && !cells.every(function (v) { return typeof v === "number"; })) {
        return false;
      }
      if (want === "changed") {
        var diff = row.values[columns.length - 1];
        if (typeof diff !== "number" || Math.abs(diff) <= 1e-9) { return false; }
      }
      if (rangeCol.value !== "") {
        var value = row.values[Number(rangeCol.value)];
        var lo = low.value === "" ? null : Number(low.value);
        var hi = high.value === "" ? null : Number(high.value);
        if (lo !== null || hi !== null) {
          if (typeof value !== "number") { return false; }
          if (lo !== null && value < lo - 1e-12) { return false; }
          if (hi !== null && value > hi + 1e-12) { return false; }
        }
      }
      return true;
    }

    function apply() {
      var shown = rows.filter(keep).sort(compareRows);
      while (body.firstChild) { body.removeChild(body.firstChild); }
      var frag = document.createDocumentFragment();
      shown.forEach(function (row) { frag.appendChild(row.tr); });
      body.appendChild(frag);
      count.textContent = "Showing " + shown.length + " of " + rows.length + " samples";
    }

    function go(row) {
      var target = byId(row.anchor);
      if (row.also) {
        var other = byId(row.also);
        if (other) { other.open = true; }
      }
      if (!target) { return; }
      target.open = true;
      if (window.location.hash === "#" + row.anchor) {
        target.scrollIntoView();
      } else {
        window.location.hash = row.anchor;
      }
    }

    body.addEventListener("click", function (event) {
      var tr = event.target.closest("tr");
      if (!tr) { return; }
      event.preventDefault();
      var row = rows.filter(function (r) { return r.tr === tr; })[0];
      if (row) { go(row); }
    });
    view.addEventListener("change", function () {
      sortCol = -1;  // the columns mean something else now
      fillMetrics();
      build();
    });
    metricSel.addEventListener("change", build);
    [search, low, high].forEach(function (el) { el.addEventListener("input", apply); });
    [status, rangeCol].forEach(function (el) { el.addEventListener("change", apply); });
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    form.addEventListener("reset", function (event) {
      event.preventDefault();
      search.value = "";
      status.value = "all";
      rangeCol.value = "";
      low.value = "";
      high.value = "";
      apply();
    });
    var links = document.querySelectorAll("a.per-question");
    Array.prototype.forEach.call(links, function (link) {
      link.addEventListener("click", function () {
        var target = "pair:" + link.getAttribute("data-pair");
        if (view.value !== target) { sortCol = -1; }
        view.value = target;
        fillMetrics();
        metricSel.value = link.getAttribute("data-metric");
        build();
      });
    });
    fillMetrics();
    build();
  }
})();
"""


def script_hash() -> str:
    """The ``sha256-...`` source the page's Content-Security-Policy allows: this script only."""
    return "sha256-" + base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()
