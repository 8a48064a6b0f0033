"""The stylesheet and the one script of ``ragbridge serve``, served from ``/static/``.

The stylesheet is the static report's (`ragbridge.adapters.report.assets.CSS`) plus the few
rules the app's own pages need, so a served run looks like its report. The script re-queries
the sample table through ``/api/samples`` as the user types or sorts, and rebuilds the rows with
``textContent`` and ``setAttribute`` only (never ``innerHTML``), so no datum is parsed as markup;
without it the same form works by reloading the page.
"""

from __future__ import annotations

from ragbridge.adapters.report.assets import CSS as REPORT_CSS

__all__ = ["CSS", "JS"]

CSS = (
    REPORT_CSS
    + """
nav a { font-weight: 600; }
td.failed { color: #a12a2a; }
td.skipped, td.absent { color: #6b7a8f; }
td.diff.better, span.better { color: #25794a; font-weight: 700; }
td.diff.worse, span.worse { color: #b23030; font-weight: 700; }
tr.changed { background: #fff7e0; }
svg.trend .axis { stroke: #9aa6b2; stroke-width: 1; }
svg.trend .series { fill: none; stroke: #2f6fb0; stroke-width: 2; }
svg.trend .point { fill: #2f6fb0; }
svg.trend .point.change.worse { fill: #b23030; }
svg.trend .point.change.better { fill: #25794a; }
#sample-tools input[type="number"] { width: 5rem; }
"""
)

JS = """
(function () {
  "use strict";
  var form = document.getElementById("sample-tools");
  if (!form) { return; }
  var runId = form.getAttribute("data-run");
  var body = document.querySelector("#sample-table tbody");
  var count = document.getElementById("st-count");
  var pager = document.getElementById("pager");
  var limit = 50;
  var offset = 0;
  var timer = null;
  var serial = 0;

  function params() {
    var data = new FormData(form);
    var out = new URLSearchParams();
    data.forEach(function (value, key) {
      if (key !== "id" && value !== "") { out.append(key, value); }
    });
    out.set("run", runId);
    if (offset) { out.set("offset", String(offset)); }
    return out;
  }

  function cellOf(value) {
    var td = document.createElement("td");
    td.className = "num";
    if (value === null) { td.textContent = "\\u2014"; td.classList.add("absent"); }
    else if (typeof value === "number") { td.textContent = value.toFixed(3); }
    else {
      td.textContent = value;
      td.classList.add(value.indexOf("failed") === 0 ? "failed" : "skipped");
    }
    return td;
  }

  function link(text, rel, to) {
    var a = document.createElement("a");
    a.textContent = text;
    a.setAttribute("rel", rel);
    a.href = "#samples";
    a.addEventListener("click", function (event) {
      event.preventDefault();
      offset = to;
      load();
    });
    return a;
  }

  function render(data) {
    while (body.firstChild) { body.removeChild(body.firstChild); }
    data.rows.forEach(function (row) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-sample", row.id);
      var td = document.createElement("td");
      var a = document.createElement("a");
      a.textContent = row.id;
      a.href = "/sample?" + new URLSearchParams({run: runId, id: row.id}).toString();
      td.appendChild(a);
      tr.appendChild(td);
      row.cells.forEach(function (value) { tr.appendChild(cellOf(value)); });
      body.appendChild(tr);
    });
    var first = data.rows.length ? data.offset + 1 : 0;
    count.textContent = data.matched + " of " + data.total + " samples match; showing " +
      first + "\\u2013" + (data.offset + data.rows.length) + ".";
    while (pager.firstChild) { pager.removeChild(pager.firstChild); }
    if (data.offset > 0) {
      pager.appendChild(link("\\u2190 previous", "prev", Math.max(0, data.offset - data.limit)));
      pager.appendChild(document.createTextNode(" "));
    }
    if (data.offset + data.limit < data.matched) {
      pager.appendChild(link("next \\u2192", "next", data.offset + data.limit));
    }
    document.body.setAttribute("data-table-ready", String(serial));
  }

  function load() {
    var query = params();
    var mine = ++serial;
    var page = new URLSearchParams(query);
    page.delete("run");
    page.set("id", runId);
    history.replaceState(null, "", "/run?" + page.toString());
    fetch("/api/samples?" + query.toString(), {credentials: "same-origin"})
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) { if (mine === serial) { limit = data.limit; render(data); } })
      .catch(function (error) { count.textContent = "Could not load the samples: " + error; });
  }

  function soon() {
    offset = 0;
    if (timer) { clearTimeout(timer); }
    timer = setTimeout(load, 150);
  }

  form.addEventListener("submit", function (event) { event.preventDefault(); soon(); });
  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
  var heads = document.querySelectorAll("#sample-table thead th[data-metric]");
  Array.prototype.forEach.call(heads, function (th) {
    th.addEventListener("click", function () {
      var sort = document.getElementById("st-sort");
      var desc = document.getElementById("st-desc");
      var metric = th.getAttribute("data-metric");
      if (sort.value === metric) { desc.checked = !desc.checked; }
      else { sort.value = metric; desc.checked = false; }
      soon();
    });
  });
  document.body.setAttribute("data-table-ready", "0");
  void limit;
})();
"""
