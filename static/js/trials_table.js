// The experiment page's trials table: the server renders one page of rows
// (dashboard/trials_table.py, 50 a page) in the chosen sort (?sort=, ?page=); this script swaps
// pages and sorts in place (GET /experiments/<id>/trials/?page=&sort=&filter=&columns=, an HTML
// fragment) so the legend's state (static/js/trials_legend.js: hidden trials, search, colours) and
// the selection survive, and keeps the address bar's query in step. Without it the links reload
// the page. The filter box and the columns are a plain GET form (a page load).
//
// Selection spans pages: `selected` holds trial ids; "Select all matching trials" selects every
// trial the legend keeps (the filter box's trials, search, top N, axis ranges) on every page,
// and the compare form gets the ids not on the page as hidden fields. Rows the legend does not keep are dimmed, not removed
// (the table pages on the server). A row's controls are fetched (dashboard/views/trial.py,
// trial_menu) when its "Actions" button is pressed; hovering a row emits hw:trial-hover and a
// chart's hover lights a row.
window.TrialsTable = (function () {
  "use strict";
  var SOURCE = "trials-table";
  var openMenus = {}; // trial id -> true
  var selected = {}; // trial id -> true, across pages
  var current = null; // {container, table, body, rows}
  var hovered = null; // id lit by another component's hw:trial-hover
  var view = { page: null, sort: null, filter: "", columns: "" };

  function idOf(row) {
    return Number(row.dataset.trial);
  }

  function selectedIds() {
    return Object.keys(selected).map(Number).sort(function (a, b) { return a - b; });
  }

  // Paint one row from the legend's state: swatch colour, shown/hidden, kept by the filters.
  function paint(row, kept) {
    var id = idOf(row);
    var hidden = TrialsLegend.isHidden(id);
    row.classList.toggle("legend-off", hidden || !kept[id]);
    row.classList.toggle("legend-filtered", !kept[id]);
    var toggle = row.querySelector(".legend-toggle");
    if (toggle) {
      toggle.setAttribute("aria-pressed", hidden ? "false" : "true");
      toggle.title = (hidden ? "Show" : "Hide") + " trial " + id + " in the charts";
      toggle.querySelector(".swatch").style.background = TrialsLegend.colorOf(id);
    }
    var box = row.querySelector("input[name=trial]");
    if (box) {
      box.checked = Boolean(selected[id]);
    }
    row.classList.toggle("hover-linked", hovered === id);
  }

  function showSelection() {
    if (!current) {
      return;
    }
    var count = current.container.querySelector(".selected-count");
    var n = selectedIds().length;
    if (count) {
      count.textContent = n + " selected";
    }
    var all = current.container.querySelector("input.select-all");
    if (all && TrialsLegend.ready()) {
      var kept = Object.keys(TrialsLegend.keptIds());
      all.checked = kept.length > 0 && kept.every(function (id) { return selected[id]; });
      all.indeterminate = !all.checked && n > 0;
    }
  }

  // Repaint the page's rows (legend changes, selection changes).
  function render() {
    if (!current || !TrialsLegend.ready()) {
      return;
    }
    var kept = TrialsLegend.keptIds();
    current.rows.forEach(function (row) { paint(row, kept); });
    showSelection();
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

  // Open the menu of trial `id` (from a #trial-N link) when its row is on this page.
  function reveal(id) {
    var row = current && current.rows.filter(function (r) { return idOf(r) === id; })[0];
    if (row) {
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

  function onBodyChange(event) {
    var box = event.target;
    if (box.name !== "trial") {
      return;
    }
    if (box.checked) {
      selected[box.value] = true;
    } else {
      delete selected[box.value];
    }
    showSelection();
  }

  function hover(id) {
    document.dispatchEvent(new CustomEvent("hw:trial-hover", {
      detail: { id: id, source: SOURCE },
    }));
  }

  // Load another page or sort of the table (the fragment route) in place.
  function go(params) {
    var bar = current && current.container.querySelector(".trials-legend");
    if (!bar) {
      return;
    }
    var query = new URLSearchParams();
    if (bar.dataset.filter) {
      query.set("filter", bar.dataset.filter);
    }
    if (bar.dataset.columns) {
      query.set("columns", bar.dataset.columns);
    }
    query.set("sort", params.sort || bar.dataset.sort);
    query.set("page", params.page || "1");
    var container = current.container;
    container.setAttribute("aria-busy", "true");
    fetch(bar.dataset.tableUrl + "?" + query.toString(), {
      credentials: "same-origin", headers: { Accept: "text/html" },
    }).then(function (response) {
      if (!response.ok) {
        throw new Error("error " + response.status);
      }
      return response.text();
    }).then(function (html) {
      replace(container, html);
      var address = new URL(window.location.href);
      ["filter", "columns", "sort", "page"].forEach(function (key) {
        if (query.has(key)) {
          address.searchParams.set(key, query.get(key));
        } else {
          address.searchParams.delete(key);
        }
      });
      address.hash = "";
      window.history.replaceState(null, "", address.toString());
    }).catch(function () {
      // Fall back to the link itself: a full page load.
      window.location.href = params.href;
    }).finally(function () {
      container.removeAttribute("aria-busy");
    });
  }

  // Sort headings and pager links: same-page swaps (the hrefs still work without scripts).
  function onLinkClick(event) {
    var link = event.target.closest("a.sort, .trials-pager a[data-page]");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey) {
      return;
    }
    event.preventDefault();
    if (link.classList.contains("sort")) {
      go({ sort: link.dataset.sort, page: "1", href: link.href });
    } else {
      go({ page: link.dataset.page, href: link.href });
    }
  }

  function enhance(container) {
    var table = container.querySelector("table.trials");
    var bar = container.querySelector(".trials-legend");
    if (!table || !bar) {
      current = null;
      return;
    }
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).filter(function (row) {
      return row.dataset.trial;
    });
    current = { container: container, table: table, body: body, rows: rows };
    view = {
      page: bar.dataset.page, sort: bar.dataset.sort,
      filter: bar.dataset.filter || "", columns: bar.dataset.columns || "",
    };
    body.addEventListener("click", onBodyClick);
    body.addEventListener("change", onBodyChange);
    body.addEventListener("mouseover", function (event) {
      var row = event.target.closest("tr[data-trial]");
      if (row && !row.contains(event.relatedTarget)) {
        hover(idOf(row));
      }
    });
    body.addEventListener("mouseleave", function () { hover(null); });
    var all = container.querySelector("input.select-all");
    if (all) {
      all.addEventListener("change", function () {
        // Every trial the legend keeps, on every page (not just the rows shown), that matches
        // the filter box.
        if (!all.checked) {
          selected = {};
          render();
          return;
        }
        // The legend's kept trials already follow the filter box, once its ids are in.
        TrialsLegend.filterSettled().then(function () {
          Object.keys(TrialsLegend.keptIds()).forEach(function (id) { selected[id] = true; });
          render();
        }).catch(function (error) {
          all.checked = false;
          var count = container.querySelector(".selected-count");
          if (count) {
            count.textContent = "Could not select (" + error.message + ").";
          }
        });
      });
    }
    TrialsLegend.attach(bar); // calls render() through onChange once the trials are there
    render();
    rows.forEach(function (row) {
      if (openMenus[idOf(row)]) {
        toggleMenu(row, true);
      }
    });
  }

  // Swap in a freshly rendered table (a page change, a sort, a live update), keeping the
  // selection and open menus.
  function replace(container, html) {
    container.innerHTML = html;
    enhance(container);
  }

  TrialsLegend.onChange(render);

  // Selected trials on other pages are not in the document: the compare form gets them as
  // hidden fields.
  document.addEventListener("submit", function (event) {
    if (event.target.id !== "compare-form" || !current) {
      return;
    }
    var form = event.target;
    form.querySelectorAll("input.ticked-elsewhere").forEach(function (el) { el.remove(); });
    var onPage = {};
    current.rows.forEach(function (row) { onPage[idOf(row)] = true; });
    selectedIds().forEach(function (id) {
      if (onPage[id]) {
        return;
      }
      var field = document.createElement("input");
      field.type = "hidden";
      field.name = "trial";
      field.value = String(id);
      field.className = "ticked-elsewhere";
      form.appendChild(field);
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

  function start() {
    var container = document.getElementById("trials");
    if (!container) {
      return;
    }
    container.addEventListener("click", onLinkClick);
    enhance(container);
    var match = /^#trial-(\d+)$/.exec(window.location.hash);
    if (match) {
      reveal(Number(match[1]));
    }
  }

  // A deferred script runs once the document is parsed.
  start();

  return {
    replace: replace,
    enhance: enhance,
    reveal: reveal,
    selectedIds: selectedIds,
    // The table's page, sort, filter and columns, for the live poll (experiment.js) to
    // re-render the same page.
    view: function () {
      return { page: view.page, sort: view.sort, filter: view.filter, columns: view.columns };
    },
  };
})();
