// Hyperparameter views of a search (experiment page, templates/dashboard/_hparams.html):
// parallel coordinates (each hyperparameter that varies, then the searcher metric; one line per
// trial with a value, coloured by the metric) whose axis ranges filter the trials, and one
// scatter per hyperparameter (value against the trial's best searcher metric). Data: the page's
// trials JSON (static/js/trials_data.js, dashboard.overview.trials_data). Text values become categorical axes.
//
// Events (on document, the dashboard's shared contract, docs/dashboard.md):
// - emits `hw:hparam-filter` {ids: number[] | null} when an axis range changes: the trials inside
//   every range (null when no range is set);
// - emits `hw:trial-hover` {id, source: "hparams"} while a line or a scatter point is hovered;
// - listens to `hw:trials-visible` (draw only those trials), `hw:trial-colors` (recolour the
//   scatters' dots, mark the best trial; the parallel coordinates stay on the metric's scale) and `hw:trial-hover` from other sources (enlarge the dot).
(function () {
  "use strict";
  var parcoords = document.getElementById("hparam-parcoords");
  if (!parcoords || typeof Plotly === "undefined" || !window.HeadwayTrialsData) {
    return;
  }
  // Drawn once the trials JSON arrived and the metric charts have drawn (hw:charts-drawn): 1,000
  // lines of parcoords (WebGL, software-rendered in a GPU-less browser) and two 1,000-point
  // scatters cost seconds on a busy machine, which must not delay the charts at the top.
  var board = document.getElementById("metrics-board");
  var chartsDrawn = new Promise(function (resolve) {
    if (!board || board.dataset.drawn !== undefined) {
      resolve();
      return;
    }
    document.addEventListener("hw:charts-drawn", function (event) {
      if (event.detail && event.detail.board === board.id) {
        resolve();
      }
    });
  });
  Promise.all([HeadwayTrialsData.promise, chartsDrawn]).then(function (both) {
    var data = both[0];
    if (data && data.hparams.length) {
      start(data);
    }
  });

  function start(data) {
  var SOURCE = "hparams";
  var D3 = window.HeadwayFormat ? window.HeadwayFormat.D3 : ".4~g";
  var config = { responsive: true, displaylogo: false };
  var scored = data.trials.filter(function (t) { return t.value !== null; });
  var metricValues = scored.map(function (t) { return t.value; });
  // Shared state, changed by the contract's events; the legend's state when it is there.
  var legend = window.TrialsLegend && TrialsLegend.ready() ? TrialsLegend.current() : null;
  var visible = legend ? new Set(legend.ids) : null; // Set of trial ids to draw, null = all
  var colors = legend ? legend.colors : null; // {id: "#rrggbb"} from hw:trial-colors (scatters)
  var best = legend ? legend.best : null;
  var hovered = null;

  function plain(text) {
    // Names go into Plotly titles and hover templates, which read <, & and %{...} as markup.
    return String(text).replace(/[<>&%{}]/g, "");
  }

  function isNumeric(name) {
    return data.trials.every(function (t) {
      var v = t.hparams[name];
      return v === null || v === undefined || typeof v === "number";
    });
  }

  function categoryOf(v) {
    return v === null || v === undefined ? "(none)" : String(v);
  }

  // Learning rates and the like span decades: a log axis when every value is positive and the
  // largest is at least 100 times the smallest.
  function isLog(name) {
    if (!isNumeric(name)) {
      return false;
    }
    var values = scored.map(function (t) { return t.hparams[name]; })
      .filter(function (v) { return v !== null && v !== undefined; });
    if (!values.length) {
      return false;
    }
    var lo = Math.min.apply(null, values);
    var hi = Math.max.apply(null, values);
    return lo > 0 && hi / lo >= 100;
  }

  // One parcoords axis over every scored trial: {label, values (aligned with `scored`), range,
  // tickvals?, ticktext?}. parcoords has no log axis: log hparams are placed by log10 and
  // labelled by decade; categories are placed at their sorted index.
  function axis(name) {
    var raw = scored.map(function (t) { return t.hparams[name]; });
    var dim = { label: plain(name) };
    if (!isNumeric(name)) {
      var categories = [];
      raw.forEach(function (v) {
        if (categories.indexOf(categoryOf(v)) < 0) {
          categories.push(categoryOf(v));
        }
      });
      categories.sort();
      dim.values = raw.map(function (v) { return categories.indexOf(categoryOf(v)); });
      dim.tickvals = categories.map(function (_, i) { return i; });
      dim.ticktext = categories.map(plain);
    } else if (isLog(name)) {
      dim.values = raw.map(function (v) { return v === null || v === undefined ? null : Math.log10(v); });
      var lo = Math.floor(Math.min.apply(null, dim.values.filter(isFinite)));
      var hi = Math.ceil(Math.max.apply(null, dim.values.filter(isFinite)));
      dim.tickvals = [];
      for (var d = lo; d <= hi; d += 1) {
        dim.tickvals.push(d);
      }
      dim.ticktext = dim.tickvals.map(function (d) { return "1e" + d; });
    } else {
      dim.values = raw.map(function (v) { return v === undefined ? null : v; });
    }
    var finite = dim.values.filter(function (v) { return v !== null && isFinite(v); });
    // A fixed range: the axes stay put while hw:trials-visible draws a subset.
    dim.range = [Math.min.apply(null, finite), Math.max.apply(null, finite)];
    if (dim.range[0] === dim.range[1]) {
      dim.range = [dim.range[0] - 0.5, dim.range[1] + 0.5];
    }
    return dim;
  }

  var note = document.createElement("p");
  note.className = "muted";
  if (scored.length < 2) {
    note.textContent = "The views appear once two trials have a validation value of " +
      data.metric + ".";
    parcoords.replaceWith(note);
    return;
  }
  var axes = data.hparams.map(axis);
  // The metric's axis: the trials' values, last.
  var metricLo = Math.min.apply(null, metricValues);
  var metricHi = Math.max.apply(null, metricValues);
  axes.push({ label: plain(data.metric), values: metricValues,
    range: metricLo === metricHi ? [metricLo - 0.5, metricHi + 0.5] : [metricLo, metricHi] });

  var kept = null; // Set of the ids inside the axis ranges (the latest hw:hparam-filter), or null

  // Indexes into `scored` of the trials to draw. The parallel coordinates also keep the trials
  // outside their own axis ranges (`context`): parcoords greys them, so a range can be widened
  // again; hw:trials-visible cannot tell those from trials the table hides, since it is the
  // table's filters intersected with ours.
  function shown(context) {
    var out = [];
    scored.forEach(function (t, i) {
      if (visible === null || visible.has(t.id) || (context && kept !== null && !kept.has(t.id))) {
        out.push(i);
      }
    });
    return out;
  }

  // The line colours: always the searcher metric on Viridis with a colour bar (the docs' "coloured
  // by the metric"; the better end darker, smaller_is_better respected), whatever the table's
  // "Colour by": a hundred trial hues on crossing lines say nothing.
  function lineStyle(rows) {
    return {
      color: rows.map(function (i) { return metricValues[i]; }),
      cmin: axes[axes.length - 1].range[0],
      cmax: axes[axes.length - 1].range[1],
      colorscale: "Viridis",
      reversescale: !data.smaller_is_better,
      showscale: true,
      colorbar: { title: { text: plain(data.metric) } },
    };
  }

  function currentRanges() {
    var drawn = parcoords.data && parcoords.data[0] ? parcoords.data[0].dimensions : [];
    return axes.map(function (_, k) { return drawn[k] ? drawn[k].constraintrange : undefined; });
  }

  var drawnRows = []; // indexes into `scored` of the lines drawn, in order

  function drawParcoords() {
    var rows = shown(true);
    drawnRows = rows;
    var ranges = currentRanges();
    var dimensions = axes.map(function (a, k) {
      var dim = { label: a.label, range: a.range, values: rows.map(function (i) { return a.values[i]; }) };
      if (a.tickvals) {
        dim.tickvals = a.tickvals;
        dim.ticktext = a.ticktext;
      } else {
        dim.tickformat = D3; // the dashboard's 4 significant digits (format.js)
      }
      if (ranges[k]) {
        dim.constraintrange = ranges[k];
      }
      return dim;
    });
    var layout = { margin: { l: 60, r: 80, t: 50, b: 30 }, height: 360 };
    return HeadwayChartConfig.react(parcoords, [{ type: "parcoords", dimensions: dimensions, line: lineStyle(rows) }],
      layout, config);
  }

  // The ids of the scored trials inside every axis range, or null when no range is set.
  // A range is [lo, hi] or a list of them (several brushes on one axis).
  function keptIds() {
    var ranges = currentRanges();
    var set = false;
    var kept = scored.filter(function (t, i) {
      return ranges.every(function (range, k) {
        if (!range || !range.length) {
          return true;
        }
        set = true;
        var list = typeof range[0] === "number" ? [range] : range;
        var v = axes[k].values[i];
        return v !== null && list.some(function (r) { return v >= r[0] && v <= r[1]; });
      });
    });
    return set ? kept.map(function (t) { return t.id; }) : null;
  }

  var status = document.getElementById("hparam-filter-status");
  var clear = document.getElementById("hparam-filter-clear");

  function emitFilter() {
    var ids = keptIds();
    kept = ids === null ? null : new Set(ids);
    if (status) {
      status.textContent = ids === null ? "No axis range set." :
        ids.length + " of " + scored.length + " trials inside the axis ranges.";
    }
    if (clear) {
      clear.hidden = ids === null;
    }
    document.dispatchEvent(new CustomEvent("hw:hparam-filter", { detail: { ids: ids } }));
  }

  function hover(id) {
    document.dispatchEvent(new CustomEvent("hw:trial-hover", { detail: { id: id, source: SOURCE } }));
  }

  drawParcoords().then(function () {
    // parcoords' hover names the line under the pointer as `curveNumber` (its index in the trace).
    parcoords.on("plotly_hover", function (event) {
      var row = event ? drawnRows[event.curveNumber] : undefined;
      hover(row === undefined ? null : scored[row].id);
    });
    parcoords.on("plotly_unhover", function () { hover(null); });
    // A brush drag (or Plotly.restyle of a constraintrange) restyles the trace.
    parcoords.on("plotly_restyle", function (event) {
      var changed = event && event[0] ? Object.keys(event[0]) : [];
      if (changed.some(function (key) { return key.indexOf("constraintrange") >= 0; })) {
        emitFilter();
      }
    });
  });
  if (clear) {
    clear.addEventListener("click", function () {
      var update = {};
      axes.forEach(function (_, k) { update["dimensions[" + k + "].constraintrange"] = null; });
      Plotly.restyle(parcoords, update, [0]);
    });
  }

  // --- one scatter per hyperparameter ---
  var grid = document.getElementById("hparam-scatters");
  var scatters = data.hparams.map(function (name) {
    var div = document.createElement("div");
    div.className = "hparam-scatter";
    div.setAttribute("role", "img");
    div.setAttribute("aria-label", data.metric + " against " + name);
    grid.appendChild(div);
    return { name: name, div: div, numeric: isNumeric(name), log: isLog(name) };
  });

  function drawScatter(s) {
    var rows = shown();
    var marker = { size: rows.map(function (i) { return scored[i].id === hovered ? 13 : 8; }) };
    if (colors === null) {
      Object.assign(marker, { color: rows.map(function (i) { return metricValues[i]; }),
        colorscale: "Viridis", reversescale: !data.smaller_is_better });
    } else {
      marker.color = rows.map(function (i) { return colors[scored[i].id] || "#888888"; });
    }
    // The best and the hovered trial's dots are outlined in the text colour (either theme).
    var outline = getComputedStyle(document.documentElement).getPropertyValue("--fg").trim() || "#000000";
    marker.line = { color: outline, width: rows.map(function (i) {
      return scored[i].id === best || scored[i].id === hovered ? 2 : 0;
    }) };
    var layout = {
      title: { text: plain(s.name), font: { size: 13 } },
      xaxis: { type: s.numeric ? (s.log ? "log" : "linear") : "category", title: { text: plain(s.name) },
        categoryorder: "category ascending" },
      yaxis: { title: { text: plain(data.metric) } },
      margin: { l: 55, r: 10, t: 40, b: 45 },
      height: 260,
    };
    return HeadwayChartConfig.react(s.div, [{
      type: "scatter",
      mode: "markers",
      x: rows.map(function (i) {
        var v = scored[i].hparams[s.name];
        return s.numeric ? v : categoryOf(v);
      }),
      y: rows.map(function (i) { return metricValues[i]; }),
      customdata: rows.map(function (i) { return scored[i].id; }),
      hovertemplate: "Trial %{customdata}<br>" + plain(s.name) +
        " %{x" + (s.numeric ? ":" + D3 : "") + "}<br>" + plain(data.metric) + " %{y:" + D3 + "}<extra></extra>",
      marker: marker,
    }], layout, config);
  }

  scatters.forEach(function (s) {
    drawScatter(s).then(function () {
      s.div.on("plotly_hover", function (event) {
        hover(event.points && event.points[0] ? event.points[0].customdata : null);
      });
      s.div.on("plotly_unhover", function () { hover(null); });
    });
  });

  // data-redraws on #hparam-views counts the finished redraws (tests wait on it, not on a clock).
  var views = document.getElementById("hparam-views");
  var redraws = 0;

  function redrawAll() {
    Promise.all([drawParcoords()].concat(scatters.map(drawScatter))).then(function () {
      redraws += 1;
      views.dataset.redraws = String(redraws);
    });
  }

  document.addEventListener("hw:trials-visible", function (event) {
    var ids = event.detail && event.detail.ids;
    visible = Array.isArray(ids) ? new Set(ids) : null;
    redrawAll();
  });
  document.addEventListener("hw:trial-colors", function (event) {
    var detail = event.detail || {};
    colors = detail.colors || null;
    best = detail.best === undefined ? null : detail.best;
    redrawAll();
  });
  document.addEventListener("hw:theme", function () {
    scatters.forEach(drawScatter); // the outline colour; chart_config.js relayouts the rest
  });
  document.addEventListener("hw:trial-hover", function (event) {
    var detail = event.detail || {};
    if (detail.source === SOURCE) {
      return;
    }
    hovered = detail.id === undefined ? null : detail.id;
    scatters.forEach(drawScatter);
  });
  }
})();
