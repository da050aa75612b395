// The experiment page's trials table: the server renders every trial's row once; this script
// keeps them out of the document and shows one page of PAGE_SIZE rows at a time (a 1,000-trial
// search puts 50 rows in the page, not 1,000), in the chosen sort with the best trial pinned
// first, filtered by the legend (static/js/trials_legend.js). A row's controls are fetched
// (dashboard/views/trial.py, trial_menu) when its "Actions" button is pressed. Sort, page, ticks and open menus survive a
// live swap of the table; hovering a row emits hw:trial-hover and a chart's hover lights a row.
window.TrialsTable = (function () {
  "use strict";
  var PAGE_SIZE = 50;
  var SOURCE = "trials-table";
  var sort = null; // {column, descending}
  var page = 0;
  var openMenus = {}; // trial id -> true
  var current = null; // {container, table, body, rows}
  var hovered = null; // id lit by another component's hw:trial-hover

  function cellValue(row, column, type) {
    var cell = row.cells[column];
    var raw = cell ? (cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent) : "";
    raw = raw.trim();
    var number = raw === "" ? NaN : Number(raw);
    if (type === "number" || type === "best" || (type === "auto" && !isNaN(number))) {
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

  function idOf(row) {
    return Number(row.dataset.trial);
  }

  // The rows in display order: the best trial first, then the chosen sort (empty cells last
  // whatever the direction; "best" columns put the best value first when ascending), ties by id.
  function ordered(table, rows) {
    var header = sort ? table.tHead.rows[0].cells[sort.column] : null;
    var type = header ? header.dataset.type || "text" : null;
    var flip = type === "best" && table.closest("#trials").querySelector(".trials-legend")
      .dataset.smallerIsBetter === "false";
    var best = TrialsLegend.best();
    return rows.slice().sort(function (r1, r2) {
      if ((idOf(r1) === best) !== (idOf(r2) === best)) {
        return idOf(r1) === best ? -1 : 1;
      }
      if (type) {
        var a = cellValue(r1, sort.column, type);
        var b = cellValue(r2, sort.column, type);
        if (a.empty !== b.empty) {
          return a.empty ? 1 : -1;
        }
        var order = compare(a, b) * (flip ? -1 : 1);
        if (order !== 0) {
          return sort.descending ? -order : order;
        }
      }
      return idOf(r1) - idOf(r2);
    });
  }

  // Paint one row from the legend's state: swatch colour, shown/hidden in the charts.
  function paint(row) {
    var id = idOf(row);
    var hidden = TrialsLegend.isHidden(id);
    row.classList.toggle("legend-off", hidden);
    var toggle = row.querySelector(".legend-toggle");
    if (toggle) {
      toggle.setAttribute("aria-pressed", hidden ? "false" : "true");
      toggle.title = (hidden ? "Show" : "Hide") + " trial " + id + " in the charts";
      toggle.querySelector(".swatch").style.background = TrialsLegend.colorOf(id);
    }
    row.classList.toggle("hover-linked", hovered === id);
  }

  // Put the current page of kept rows into the table body.
  function render() {
    if (!current) {
      return;
    }
    var kept = TrialsLegend.keptIds();
    var list = ordered(current.table, current.rows).filter(function (row) {
      return kept[idOf(row)];
    });
    var pages = Math.max(1, Math.ceil(list.length / PAGE_SIZE));
    page = Math.min(page, pages - 1);
    var shown = list.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
    shown.forEach(paint);
    current.body.replaceChildren.apply(current.body, shown);
    var pager = current.container.querySelector(".trials-pager");
    if (pager) {
      pager.hidden = pages < 2;
      pager.querySelector(".pager-label").textContent = "Page " + (page + 1) + " of " + pages;
      pager.querySelector(".pager-prev").disabled = page === 0;
      pager.querySelector(".pager-next").disabled = page >= pages - 1;
    }
    var count = current.container.querySelector(".legend-count");
    if (count) {
      count.textContent = list.length + " of " + current.rows.length + " trials";
    }
    Array.prototype.forEach.call(current.table.tHead.rows[0].cells, function (th, i) {
      if (th.dataset.type) {
        th.setAttribute("aria-sort", sort && i === sort.column ?
          (sort.descending ? "descending" : "ascending") : "none");
      }
    });
  }

  // Fetch a row's menu (dashboard/views/trial.py, trial_menu) into `menu`; a logged-out session (the login
  // page answers instead) or an error says so in the menu.
  function load(menu, url) {
    fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok || new URL(response.url).pathname !== new URL(url, location.href).pathname) {
          throw new Error(response.ok ? "session expired: reload the page" : "error " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        menu.innerHTML = html;
      })
      .catch(function (error) {
        menu.textContent = "Could not load the controls (" + error.message + ").";
      });
  }

  // Fetch a row's controls (once) when its menu opens, and show or hide them.
  function toggleMenu(row, open) {
    var button = row.querySelector("button.row-menu");
    if (!button) {
      return;
    }
    var cell = button.closest("td");
    var menu = cell.querySelector(".row-menu-panel");
    if (open && !menu) {
      menu = document.createElement("div");
      menu.className = "row-menu-panel";
      menu.id = "trial-menu-" + idOf(row);
      menu.textContent = "Loading\u2026";
      cell.appendChild(menu);
      button.setAttribute("aria-controls", menu.id);
      load(menu, button.dataset.menuUrl);
    }
    if (menu) {
      menu.hidden = !open;
    }
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      openMenus[idOf(row)] = true;
    } else {
      delete openMenus[idOf(row)];
    }
  }

  // Show the page holding trial `id` (from a #trial-N link) and open its menu.
  function reveal(id) {
    var row = current && current.rows.filter(function (r) { return idOf(r) === id; })[0];
    if (!row) {
      return;
    }
    var kept = TrialsLegend.keptIds();
    var list = ordered(current.table, current.rows).filter(function (r) { return kept[idOf(r)]; });
    var index = list.indexOf(row);
    if (index >= 0) {
      page = Math.floor(index / PAGE_SIZE);
      render();
      toggleMenu(row, true);
      row.scrollIntoView({ block: "center" });
    }
  }

  function onBodyClick(event) {
    var target = event.target;
    var row = target.closest("tr[data-trial]");
    if (!row) {
      return;
    }
    if (target.closest("button.row-menu")) {
      toggleMenu(row, target.closest("button.row-menu").getAttribute("aria-expanded") !== "true");
    } else if (target.closest("button.legend-toggle")) {
      TrialsLegend.setHidden(idOf(row), !TrialsLegend.isHidden(idOf(row)));
    }
  }

  function hover(id) {
    document.dispatchEvent(new CustomEvent("hw:trial-hover", {
      detail: { id: id, source: SOURCE },
    }));
  }

  // Header cells with data-type become buttons (keyboard reachable, announced as sortable).
  function enhanceHeaders(table) {
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
      button.addEventListener("click", function () {
        sort = { column: column, descending: Boolean(sort && sort.column === column && !sort.descending) };
        page = 0;
        render();
      });
    });
  }

  function enhance(container) {
    var table = container.querySelector("table.trials");
    var bar = container.querySelector(".trials-legend");
    if (!table || !bar) {
      current = null;
      return;
    }
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    current = { container: container, table: table, body: body, rows: rows };
    body.replaceChildren(); // rows live outside the document until their page is shown
    enhanceHeaders(table);
    body.addEventListener("click", onBodyClick);
    body.addEventListener("mouseover", function (event) {
      var row = event.target.closest("tr[data-trial]");
      if (row && !row.contains(event.relatedTarget)) {
        hover(idOf(row));
      }
    });
    body.addEventListener("mouseleave", function () { hover(null); });
    var pager = container.querySelector(".trials-pager");
    pager.querySelector(".pager-prev").addEventListener("click", function () {
      page = Math.max(0, page - 1);
      render();
    });
    pager.querySelector(".pager-next").addEventListener("click", function () {
      page += 1;
      render();
    });
    TrialsLegend.attach(bar, rows); // calls render() through onChange
    rows.forEach(function (row) {
      if (openMenus[idOf(row)]) {
        toggleMenu(row, true);
      }
    });
  }

  // Swap in a freshly rendered table, keeping the ticks, the sort, the page and open menus.
  function replace(container, html) {
    var ticked = {};
    (current ? current.rows : []).forEach(function (row) {
      var box = row.querySelector("input[name=trial]");
      if (box && box.checked) {
        ticked[box.value] = true;
      }
    });
    container.innerHTML = html;
    container.querySelectorAll("input[name=trial]").forEach(function (box) {
      box.checked = Boolean(ticked[box.value]);
    });
    enhance(container);
  }

  TrialsLegend.onChange(render);

  // Ticks on other pages are outside the document: the compare form gets them as hidden fields.
  document.addEventListener("submit", function (event) {
    if (event.target.id !== "compare-form" || !current) {
      return;
    }
    var form = event.target;
    form.querySelectorAll("input.ticked-elsewhere").forEach(function (el) { el.remove(); });
    current.rows.forEach(function (row) {
      var box = row.querySelector("input[name=trial]");
      if (box && box.checked && !row.isConnected) {
        var field = document.createElement("input");
        field.type = "hidden";
        field.name = "trial";
        field.value = box.value;
        field.className = "ticked-elsewhere";
        form.appendChild(field);
      }
    });
  });

  document.addEventListener("hw:trial-hover", function (event) {
    var detail = event.detail || {};
    if (detail.source === SOURCE || !current) {
      return;
    }
    hovered = detail.id === null || detail.id === undefined ? null : Number(detail.id);
    current.rows.forEach(function (row) {
      row.classList.toggle("hover-linked", hovered === idOf(row));
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    var container = document.getElementById("trials");
    if (!container) {
      return;
    }
    enhance(container);
    var match = /^#trial-(\d+)$/.exec(window.location.hash);
    if (match) {
      reveal(Number(match[1]));
    }
  });

  return { replace: replace, enhance: enhance, reveal: reveal, PAGE_SIZE: PAGE_SIZE };
})();
