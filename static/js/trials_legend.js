// The trials table as the shared legend of every chart on the experiment page: which trials the
// charts draw (the table's filter box, search, top N by the searcher metric, hidden rows,
// intersected with the latest hw:hparam-filter) and in which colour (by trial, by the searcher
// metric or by a hyperparameter).
// Emits on document: hw:trials-visible {ids} and hw:trial-colors {colors, best}; listens to
// hw:hparam-filter {ids | null}. The trials come from the page's trials JSON
// (static/js/trials_data.js), not from the table, which holds one page of rows
// (static/js/trials_table.js); this module keeps the state by trial id, so a page change or a
// live swap of the table keeps it. The filter box's trials are the server's (GET
// /experiments/<id>/trials/ids?filter=, the table's own filter), fetched again on every swap of
// the table, so a new filter or new metrics redraw the charts; a malformed filter is no filter.
// The colours themselves come from static/js/trial_colors.js (loaded before this module).
window.TrialsLegend = (function () {
  "use strict";
  var SOURCE = "trials-table";
  var TC = window.TrialColors;
  var NO_VALUE = TC.NO_VALUE;
  var isNumber = TC.isNumber;

  var state = { search: "", top: null, hidden: {}, colorBy: "", hparamFilter: null };
  // The ids the server says match the table's filter box ({id: true}; null: every trial).
  // `asked` counts the fetches, so only the latest one's answer is kept.
  var filtered = null;
  var asked = 0;
  // The latest filter fetch: resolves once `filtered` holds its ids, rejects when it failed.
  var filterAnswer = Promise.resolve();
  var meta = { smallerIsBetter: true, best: null, metric: "" };
  var trials = []; // [{id, value, hparams, text}] in id order
  var colors = {};
  var scale = null; // what the colour legend shows: {kind, min, max} or {kind, values}
  var sent = { visible: null, colors: null };
  var listeners = [];

  function computeColors() {
    var got = TC.colorsFor(trials, state.colorBy);
    colors = got.colors;
    scale = got.scale;
  }

  // Smaller "goodness" is better whatever the metric's direction.
  function goodness(value) {
    return meta.smallerIsBetter ? value : -value;
  }

  function compareBest(a, b) {
    var av = isNumber(a.value);
    var bv = isNumber(b.value);
    if (av !== bv) {
      return av ? -1 : 1; // no value: last
    }
    if (av && a.value !== b.value) {
      return goodness(a.value) - goodness(b.value);
    }
    return a.id - b.id;
  }

  // The ids of the best n trials by the searcher metric among those matching the filter box
  // (trials without a value never count).
  function topIds(n) {
    var ranked = trials.filter(function (t) {
      return isNumber(t.value) && (!filtered || filtered[t.id]);
    }).sort(compareBest);
    var out = {};
    ranked.slice(0, n).forEach(function (t) { out[t.id] = true; });
    return out;
  }

  function searchText(t) {
    var parts = [];
    Object.keys(t.hparams).forEach(function (k) {
      var v = t.hparams[k];
      parts.push(k + "=" + String(v));
      if (isNumber(v)) {
        parts.push(k + "=" + HeadwayFormat.number(v));
      }
    });
    return parts.join(" ").toLowerCase();
  }

  // Each token must match: "#12" or "id:12" the trial id; a bare number the id or a
  // "key=value" text; any other token a part of some "key=value" text.
  function matches(t, tokens) {
    return tokens.every(function (token) {
      var id = /^(?:#|id:)(\d+)$/.exec(token);
      if (id) {
        return t.id === Number(id[1]);
      }
      if (/^\d+$/.test(token) && t.id === Number(token)) {
        return true;
      }
      return t.text.indexOf(token) >= 0;
    });
  }

  // id -> true for the trials the table lists: the filter box, search, top N and the hparam
  // filter.
  function keptIds() {
    var tokens = state.search.toLowerCase().split(/\s+/).filter(Boolean);
    var top = state.top ? topIds(state.top) : null;
    var kept = {};
    trials.forEach(function (t) {
      if (filtered && !filtered[t.id]) {
        return;
      }
      if (tokens.length && !matches(t, tokens)) {
        return;
      }
      if (top && !top[t.id]) {
        return;
      }
      if (state.hparamFilter && !state.hparamFilter[t.id]) {
        return;
      }
      kept[t.id] = true;
    });
    return kept;
  }

  // What the charts draw: kept and not hidden, in id order.
  function visibleIds() {
    var kept = keptIds();
    return trials
      .filter(function (t) { return kept[t.id] && !state.hidden[t.id]; })
      .map(function (t) { return t.id; });
  }

  function emit(name, detail) {
    document.dispatchEvent(new CustomEvent(name, { detail: detail }));
  }

  // Tell the charts what changed: at 1,000 trials a chart redraw costs seconds, so while the
  // user types, the events wait until TYPING_PAUSE_MS after the last key; clicks send at once
  // (on the next task, so a burst of changes makes one event).
  var TYPING_PAUSE_MS = 250;
  var timer = null;

  function schedule(delay) {
    clearTimeout(timer);
    timer = setTimeout(flush, delay);
  }

  function flush() {
    timer = null;
    var ids = visibleIds();
    var visible = JSON.stringify(ids);
    if (visible !== sent.visible) {
      sent.visible = visible;
      emit("hw:trials-visible", { ids: ids });
    }
    var painted = JSON.stringify([colors, meta.best]);
    if (painted !== sent.colors) {
      sent.colors = painted;
      emit("hw:trial-colors", { colors: Object.assign({}, colors), best: meta.best });
    }
  }

  var countBox = null;

  // "V of N trials in the charts": V is what the charts draw (kept and not hidden), right
  // after every change (Hide all: 0 of N).
  function showCount() {
    if (countBox && trials.length) {
      countBox.textContent = visibleIds().length + " of " + trials.length + " trials in the charts";
    }
  }

  // The table follows at once; the charts after `delay` ms (default: the next task).
  function changed(delay) {
    showCount();
    listeners.forEach(function (fn) { fn(); });
    schedule(delay || 0);
  }

  // Read the trials from the trials JSON and the legend bar's data.
  function load(bar, data) {
    meta.smallerIsBetter = bar.dataset.smallerIsBetter !== "false";
    meta.metric = bar.dataset.metric || "";
    meta.best = bar.dataset.best ? Number(bar.dataset.best) : null;
    trials = (data ? data.trials : []).map(function (row) {
      var t = { id: row.id, value: isNumber(row.value) ? row.value : null, hparams: row.hparams || {} };
      t.text = searchText(t);
      return t;
    }).sort(function (a, b) { return a.id - b.id; });
    computeColors();
  }

  function showScale(bar) {
    var box = bar.querySelector(".legend-scale");
    if (!box) {
      return;
    }
    box.replaceChildren();
    if (!scale) {
      return;
    }
    if (scale.kind === "continuous") {
      var ramp = document.createElement("span");
      ramp.className = "legend-ramp";
      ramp.style.background = "linear-gradient(to right, " + TC.VIRIDIS.join(", ") + ")";
      box.append(HeadwayFormat.element(scale.min), ramp, HeadwayFormat.element(scale.max));
      if (scale.log) {
        box.append(" (log)");
      }
      return;
    }
    scale.values.forEach(function (entry) {
      var chip = document.createElement("span");
      chip.className = "legend-chip";
      var swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = entry.color;
      chip.append(swatch, entry.value);
      box.append(chip);
    });
  }

  var data = null; // the trials JSON, once fetched
  // The trials matching the bar's filter (data-filter: empty when there is none or the server
  // found it malformed), from the server: resolves once `filtered` holds them. A failed fetch
  // leaves every trial in the charts (the table, rendered by the server, still shows the rows).
  function followFilter(bar) {
    var text = bar.dataset.filter || "";
    var mine = ++asked;
    if (!text) {
      filtered = null;
      filterAnswer = Promise.resolve();
      return filterAnswer;
    }
    var fetched = HeadwayLive.getJSON(bar.dataset.idsUrl + "?filter=" + encodeURIComponent(text))
      .then(function (answer) {
        var ids = {};
        answer.ids.forEach(function (id) { ids[id] = true; });
        if (mine === asked) {
          filtered = ids;
        }
      });
    filterAnswer = fetched;
    return fetched.catch(function () {
      if (mine === asked) {
        filtered = null;
      }
    });
  }

  // Wire the legend bar's controls, restoring the state kept across page changes and live
  // swaps; the trials come from the trials JSON and the filter's ids (the first attach waits
  // for both, so the charts never draw the unfiltered trials first).
  function attach(bar) {
    countBox = bar.querySelector(".legend-count");
    var filtering = followFilter(bar);
    if (!data) {
      Promise.all([window.HeadwayTrialsData.promise, filtering]).then(function (got) {
        data = got[0] || { trials: [] };
        if (countBox && countBox.isConnected && bar.isConnected) {
          wire(bar);
        }
      });
      return;
    }
    // A swap of the table: the same or a new filter, whose matches the server answers again.
    filtering.then(function () {
      if (bar.isConnected) {
        changed();
      }
    });
    wire(bar);
  }

  // Read the trials into the legend and listen to the bar's controls (a fresh bar each swap).
  function wire(bar) {
    load(bar, data);
    var search = bar.querySelector(".legend-search");
    var top = bar.querySelector(".legend-top");
    var colorBy = bar.querySelector(".legend-color-by");
    search.value = state.search;
    top.value = state.top ? String(state.top) : "";
    if (colorBy.querySelector('option[value="' + CSS.escape(state.colorBy) + '"]')) {
      colorBy.value = state.colorBy;
    } else {
      state.colorBy = "";
      computeColors();
    }
    search.addEventListener("input", function () {
      state.search = search.value;
      changed(TYPING_PAUSE_MS);
    });
    top.addEventListener("input", function () {
      var n = parseInt(top.value, 10);
      state.top = n > 0 ? n : null;
      changed(TYPING_PAUSE_MS);
    });
    colorBy.addEventListener("change", function () {
      state.colorBy = colorBy.value;
      computeColors();
      showScale(bar);
      changed();
    });
    bar.querySelector(".legend-hide-all").addEventListener("click", function () {
      trials.forEach(function (t) { state.hidden[t.id] = true; });
      changed();
    });
    bar.querySelector(".legend-show-all").addEventListener("click", function () {
      state.hidden = {};
      changed();
    });
    showScale(bar);
    changed();
  }

  function setHidden(id, hidden) {
    if (hidden) {
      state.hidden[id] = true;
    } else {
      delete state.hidden[id];
    }
    changed();
  }

  // New trials (a live poll): read them, keep the state by id, repaint.
  document.addEventListener("hw:trials-data", function (event) {
    data = event.detail.data;
    var bar = countBox && countBox.closest(".trials-legend");
    if (bar && bar.isConnected) {
      load(bar, data);
      showScale(bar);
      changed();
    }
  });

  document.addEventListener("hw:hparam-filter", function (event) {
    var ids = event.detail && event.detail.ids;
    if (ids) {
      state.hparamFilter = {};
      ids.forEach(function (id) { state.hparamFilter[id] = true; });
    } else {
      state.hparamFilter = null;
    }
    if (trials.length) {
      changed();
    }
  });

  return {
    SOURCE: SOURCE,
    attach: attach,
    setHidden: setHidden,
    isHidden: function (id) { return Boolean(state.hidden[id]); },
    // Resolves once keptIds() follows the filter box; rejects when the server's ids could not
    // be fetched (keptIds() then holds every trial).
    filterSettled: function () { return filterAnswer; },
    keptIds: keptIds,
    visibleIds: visibleIds,
    ready: function () { return data !== null; },
    colorOf: function (id) { return colors[id] || NO_VALUE; },
    best: function () { return meta.best; },
    compareBest: compareBest,
    onChange: function (fn) { listeners.push(fn); },
    // For charts drawn after the events went out: the current state.
    current: function () {
      return { ids: visibleIds(), colors: Object.assign({}, colors), best: meta.best };
    },
    viridis: TC.viridis,
    trialColor: TC.trialColor,
  };
})();
