// Optional enhancements: sortable tables and row filters. The report is complete without them.
(function () {
  "use strict";
  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) return "";
    var v = cell.getAttribute("data-v");
    if (v !== null && v !== "" && !isNaN(Number(v))) return Number(v);
    return (v !== null ? v : cell.textContent).trim().toLowerCase();
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, index) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var asc = th.getAttribute("aria-sort") !== "ascending";
        table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        Array.prototype.slice.call(body.rows).sort(function (a, b) {
          var x = cellValue(a, index), y = cellValue(b, index);
          if (x === y) return 0;
          if (typeof x !== typeof y) return (typeof x === "number" ? -1 : 1);
          return (x < y ? -1 : 1) * (asc ? 1 : -1);
        }).forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  document.querySelectorAll("input.filter").forEach(function (input) {
    var scope = input.parentNode.nextElementSibling;
    input.addEventListener("input", function () {
      var needle = input.value.toLowerCase();
      scope.querySelectorAll("tbody tr").forEach(function (row) {
        row.style.display = row.textContent.toLowerCase().indexOf(needle) === -1 ? "none" : "";
      });
    });
  });
})();
