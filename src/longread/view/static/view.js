// longread view: sortable, filterable tables and a few buttons. Plain JavaScript, no build.
(function () {
  "use strict";

  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
    if (!numeric) return raw.trim().toLowerCase();
    var value = parseFloat(raw);
    return isNaN(value) ? null : value;
  }

  function sortBy(table, header) {
    var index = Array.prototype.indexOf.call(header.parentNode.children, header);
    var numeric = header.getAttribute("data-type") === "number";
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
      if (x === y) return 0;
      if (x === null) return 1;  // unknown values last, either way
      if (y === null) return -1;
      return (x < y ? -1 : 1) * (ascending ? 1 : -1);
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function applyFilter(bar, table) {
    var text = bar.querySelector(".filter-text").value.trim().toLowerCase();
    var status = bar.querySelector(".filter-status").value;
    var shown = 0, rows = table.tBodies[0].rows;
    Array.prototype.forEach.call(rows, function (row) {
      var ok = !text || row.textContent.toLowerCase().indexOf(text) >= 0;
      if (ok && status === "flagged") ok = row.hasAttribute("data-flagged");
      else if (ok && status) ok = row.getAttribute("data-status") === status;
      row.hidden = !ok;
      if (ok) shown += 1;
    });
    bar.querySelector(".filter-count").textContent = shown + " of " + rows.length + " shown";
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th) {
      th.addEventListener("click", function () { sortBy(table, th); });
    });
    var holder = table.parentElement.classList.contains("scroll") ? table.parentElement : table;
    var bar = holder.previousElementSibling;
    if (bar && bar.classList.contains("filters")) {
      var update = function () { applyFilter(bar, table); };
      bar.querySelector(".filter-text").addEventListener("input", update);
      bar.querySelector(".filter-status").addEventListener("change", update);
      update();
    }
  });

  document.querySelectorAll(".toolbar button").forEach(function (button) {
    button.addEventListener("click", function () {
      var scope = button.closest("section") || document;
      var which = button.getAttribute("data-open");
      var selector = which ? "details." + which : "li.step details";
      scope.querySelectorAll(selector).forEach(function (d) { d.open = !!which; });
    });
  });

  // An exported file carries each trace's JSON; this saves it as a file.
  document.querySelectorAll("button.download").forEach(function (button) {
    button.addEventListener("click", function () {
      var data = document.getElementById(button.getAttribute("data-json")).textContent;
      var link = document.createElement("a");
      link.href = URL.createObjectURL(new Blob([data], { type: "application/json" }));
      link.download = button.getAttribute("data-file");
      link.click();
      URL.revokeObjectURL(link.href);
    });
  });
})();
