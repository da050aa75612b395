// The experiment page's trials table: sort by any column in the browser (the table holds every
// trial of the experiment), keep the sort and the compare ticks when a live update swaps the
// table in, and copy CLI commands to the clipboard.
window.TrialsTable = (function () {
  "use strict";
  var sort = null; // {column, descending}

  function cellValue(row, column, type) {
    var cell = row.cells[column];
    var raw = cell ? (cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent) : "";
    raw = raw.trim();
    var number = raw === "" ? NaN : Number(raw);
    if (type === "number" || (type === "auto" && !isNaN(number))) {
      return { empty: raw === "" || isNaN(number), number: number, text: raw };
    }
    return { empty: raw === "", number: NaN, text: raw.toLowerCase() };
  }

  function compare(a, b) {
    if (!isNaN(a.number) && !isNaN(b.number)) {
      return a.number - b.number;
    }
    return a.text < b.text ? -1 : a.text > b.text ? 1 : 0;
  }

  // Empty cells (no value yet) go last whatever the direction.
  function apply(table) {
    if (!table || !sort) {
      return;
    }
    var header = table.tHead.rows[0].cells[sort.column];
    var type = header ? header.dataset.type || "text" : "text";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r1, r2) {
      var a = cellValue(r1, sort.column, type);
      var b = cellValue(r2, sort.column, type);
      if (a.empty !== b.empty) {
        return a.empty ? 1 : -1;
      }
      var order = compare(a, b);
      return sort.descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (th.dataset.type) {
        th.setAttribute("aria-sort", i === sort.column ?
          (sort.descending ? "descending" : "ascending") : "none");
      }
    });
  }

  // Header cells with data-type become buttons (keyboard reachable, announced as sortable).
  function enhance(container) {
    var table = container.querySelector("table.sortable");
    if (!table) {
      return;
    }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      if (!th.dataset.type || th.querySelector("button.sort")) {
        return;
      }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) {
        button.appendChild(th.firstChild);
      }
      th.appendChild(button);
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", function () {
        sort = { column: column, descending: sort && sort.column === column && !sort.descending };
        apply(table);
      });
    });
    apply(table);
  }

  // Swap in a freshly rendered table, keeping the ticks and the sort.
  function replace(container, html) {
    var ticked = {};
    container.querySelectorAll("input[name=trial]:checked").forEach(function (box) {
      ticked[box.value] = true;
    });
    container.innerHTML = html;
    container.querySelectorAll("input[name=trial]").forEach(function (box) {
      box.checked = Boolean(ticked[box.value]);
    });
    enhance(container);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var container = document.getElementById("trials");
    if (container) {
      enhance(container);
    }
  });

  return { replace: replace, enhance: enhance };
})();

