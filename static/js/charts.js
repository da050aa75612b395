// Metric charts shared by the experiment, trial and compare pages: one Plotly chart per metric,
// one line per trial, drawn from the REST metric endpoints (registry/metrics, docs/dashboard.md).
// This file holds the data side (fetch, live polls, controls, zoom); static/js/chart_view.js
// draws (on screen only, shared overview events, grouping) with static/js/chart_traces.js.
//
// - Data: GET <source>/metrics/?name=...&max_points=P&x_axis=... for every source (an experiment,
//   a trial, or an experiment restricted to some trials); P spreads a point budget over the traces.
// - Controls: metric picker, x-axis (batches / epochs / wall time), y linear / log, EMA smoothing
//   (debiased as TensorBoard does; the raw line stays faint behind), best trial drawn thicker.
// - Zoom: a drag-zoom fetches the metric again for the zoomed step range at full resolution
//   (x_min / x_max); double-click returns to the overview data.
// - Long series come in the band shape (band=true): a line through each step range's last
//   value, with the range's min / max drawn as a shaded band.
// - Live: poll() fetches only steps after each series' last one (after_step) and appends them;
//   Plotly.react keeps the user's zoom and hidden traces (layout.uirevision).
window.HeadwayCharts = (function () {
  "use strict";

  var T = window.HeadwayChartTraces;
  var POINT_BUDGET = 30000; // points per fetch over every trace; P = budget / traces
  var MIN_POINTS = 50;
  var MAX_POINTS = 2000;
  var DEFAULT_SELECTED = 12; // metrics charted before the user picks

  function metricKey(group, name) {
    return group + "/" + name;
  }

  function clamp(value, lo, hi) {
    return Math.max(lo, Math.min(hi, value));
  }

  // ?chart_mode=svg|gl|merged|merged-gl forces one trace mode (bench/dashboard.py compares them).
  function forcedMode() {
    var mode = new URLSearchParams(window.location.search).get("chart_mode");
    return T.MODES.indexOf(mode) >= 0 ? mode : null;
  }

  // options: {sources: [{url, trialId?, trialIds?}], metrics: [{group, name}],
  //           trials: [{id, label, hparams: [[key, value]]}], bestTrialId, onError,
  //           legend (default true: a plotly legend per chart; the overview's is the trials
  //           table), groupBy (default false: offer "group by <hparam>")}
  function Board(root, options) {
    this.root = root;
    this.sources = options.sources;
    this.trials = options.trials || [];
    this.trialCount = options.trialCount || 0; // trials not listed yet (fetched by the page)
    this.pendingTrials = false; // true until setTrials() when the page fetches the list
    this.bestTrialId = options.bestTrialId || null;
    this.onError = options.onError || function () {};
    this.legend = options.legend !== false;
    this.mode = forcedMode();
    this.xAxis = "batches";
    this.yType = "linear";
    this.smoothing = 0;
    this.groupBy = "";
    this.visible = null; // null: every trial; else {id: true} from hw:trials-visible
    this.colors = {}; // trial id -> "#rrggbb" from hw:trial-colors
    this.hoverId = null;
    this.metrics = [];
    this.selected = {};
    this.data = {}; // key -> trial id -> {steps, values, min?, max?, epochs?, ..., last_step}
    this.zoom = {}; // key -> {data: trial id -> entry} while zoomed in
    this.plots = {}; // key -> div
    this.inView = {}; // key -> whether its chart is on screen (IntersectionObserver)
    this.stale = {}; // key -> data changed while off screen: draw when it scrolls in
    this.charts = root.querySelector(".metric-charts");
    this.picker = root.querySelector(".metric-picker-options");
    this.status = root.querySelector(".chart-status");
    this.appended = 0;
    this.loaded = false; // no chart is drawn before the first data arrived
    this.observer = this.makeObserver();
    this.setMetrics(options.metrics || []);
    this.bindControls();
    this.wantsGroupControl = Boolean(options.groupBy);
    if (options.groupBy && !options.trialsPending) {
      this.addGroupControl();
    }
    this.pendingTrials = Boolean(options.trialsPending);
    this.listen();
  }

  Board.prototype.trialIndex = function (trialId) {
    for (var i = 0; i < this.trials.length; i++) {
      if (this.trials[i].id === trialId) {
        return i;
      }
    }
    this.trials.push({ id: trialId, label: "Trial " + trialId, hparams: [] });
    return this.trials.length - 1;
  };

  // The trials (labels, hparams for the hover and "group by") once the page fetched them:
  // [{id, label, hparams: [[key, text]]}]; drawing waits for them (chart_view.js, ready()).
  Board.prototype.setTrials = function (trials) {
    this.trials = trials;
    this.pendingTrials = false;
    if (this.wantsGroupControl) {
      this.addGroupControl();
    }
    this.renderAll();
  };

  Board.prototype.selectedKeys = function () {
    var self = this;
    return this.metrics
      .map(function (m) { return metricKey(m.group, m.name); })
      .filter(function (key) { return self.selected[key]; });
  };

  // Adds picker entries for metrics not seen yet; new ones are charted while few are.
  Board.prototype.setMetrics = function (metrics) {
    var self = this;
    var added = false;
    metrics.forEach(function (m) {
      var key = metricKey(m.group, m.name);
      if (self.metrics.some(function (o) { return metricKey(o.group, o.name) === key; })) {
        return;
      }
      self.metrics.push(m);
      self.selected[key] = self.selectedKeys().length < DEFAULT_SELECTED;
      added = true;
      if (self.picker) {
        var label = document.createElement("label");
        var box = document.createElement("input");
        box.type = "checkbox";
        box.checked = self.selected[key];
        box.dataset.key = key;
        label.appendChild(box);
        label.appendChild(document.createTextNode(" " + key));
        self.picker.appendChild(label);
      }
    });
    return added;
  };

  Board.prototype.bindControls = function () {
    var self = this;
    var root = this.root;
    var xAxis = root.querySelector("select[name=x_axis]");
    var yScale = root.querySelector("select[name=y_scale]");
    var smoothing = root.querySelector("input[name=smoothing]");
    var output = root.querySelector("output[for=" + (smoothing ? smoothing.id : "none") + "]");
    if (xAxis) {
      xAxis.addEventListener("change", function () {
        self.xAxis = xAxis.value;
        self.zoom = {};
        self.reload();
      });
    }
    if (yScale) {
      yScale.addEventListener("change", function () {
        self.yType = yScale.value;
        self.renderAll();
      });
    }
    if (smoothing) {
      smoothing.addEventListener("input", function () {
        self.smoothing = Number(smoothing.value);
        if (output) {
          output.textContent = self.smoothing.toFixed(2);
        }
        self.renderAll();
      });
    }
    if (this.picker) {
      this.picker.addEventListener("change", function (event) {
        var key = event.target.dataset.key;
        if (key) {
          self.selected[key] = event.target.checked;
          self.reload();
        }
      });
    }
    root.querySelectorAll("button[data-pick]").forEach(function (button) {
      button.addEventListener("click", function () {
        var all = button.dataset.pick === "all";
        self.picker.querySelectorAll("input[data-key]").forEach(function (box) {
          box.checked = all;
          self.selected[box.dataset.key] = all;
        });
        self.reload();
      });
    });
  };

  Board.prototype.pointsPerTrace = function (keys) {
    var count = Math.max(this.trials.length, this.trialCount);
    var traces = Math.max(1, count * Math.max(1, keys.length));
    return clamp(Math.floor(POINT_BUDGET / traces), MIN_POINTS, MAX_POINTS);
  };

  // GET every source; resolves to [{trial_id, group, name, ...}] (entries of read_series).
  Board.prototype.fetchSeries = function (params) {
    var self = this;
    var requests = this.sources.map(function (source) {
      var query = new URLSearchParams();
      Object.keys(params).forEach(function (name) {
        [].concat(params[name]).forEach(function (value) {
          if (value !== null && value !== undefined) {
            query.append(name, value);
          }
        });
      });
      (source.trialIds || []).forEach(function (id) { query.append("trial_id", id); });
      return HeadwayLive.getJSON(source.url + "?" + query.toString()).then(function (body) {
        return body.series.map(function (entry) {
          if (source.trialId !== undefined) {
            entry.trial_id = source.trialId;
          }
          return entry;
        });
      });
    });
    return Promise.all(requests).then(function (lists) {
      return [].concat.apply([], lists);
    }).catch(function (error) {
      self.onError(error);
      throw error;
    });
  };

  Board.prototype.baseParams = function (keys) {
    var names = {};
    keys.forEach(function (key) { names[key.slice(key.indexOf("/") + 1)] = true; });
    var params = {
      name: Object.keys(names), max_points: this.pointsPerTrace(keys), band: "true",
    };
    if (this.xAxis !== "batches") {
      params.x_axis = this.xAxis;
    }
    return params;
  };

  // Fetch every selected metric from scratch (first draw, picker or x-axis change).
  Board.prototype.reload = function () {
    var self = this;
    var keys = this.selectedKeys();
    this.appended = 0;
    if (!keys.length) {
      this.data = {};
      this.loaded = true;
      this.renderAll();
      return Promise.resolve();
    }
    this.setStatus("Loading\u2026");
    return this.fetchSeries(this.baseParams(keys)).then(function (entries) {
      self.data = {};
      self.store(entries, false);
      // When the first data arrived (ms since navigation start; bench/dashboard.py reads it).
      self.root.dataset.dataAt = self.root.dataset.dataAt || String(Math.round(performance.now()));
      self.loaded = true;
      self.renderAll();
      self.setStatus("");
    }).catch(function () {
      self.setStatus("Could not load the metrics.");
      if (self.announceDrawn) {
        self.announceDrawn();
      }
    });
  };

  // Live update: only points after each series' last step; appended, then redrawn.
  Board.prototype.poll = function () {
    var self = this;
    var keys = this.selectedKeys();
    if (!keys.length) {
      return Promise.resolve();
    }
    var cursor = null;
    keys.forEach(function (key) {
      var byTrial = self.data[key] || {};
      Object.keys(byTrial).forEach(function (id) {
        var last = byTrial[id].last_step;
        cursor = cursor === null ? last : Math.min(cursor, last);
      });
    });
    // A metric no trial reported yet has no cursor: read it whole.
    if (cursor === null || keys.some(function (key) { return !self.data[key]; })) {
      return this.reload();
    }
    var params = this.baseParams(keys);
    params.after_step = cursor;
    return this.fetchSeries(params).then(function (entries) {
      var grew = self.store(entries, true);
      // Appended raw tails grow without bound on a long run: re-read downsampled now and then.
      if (self.appended > 4 * params.max_points) {
        return self.reload();
      }
      if (grew) {
        self.renderAll();
      }
    });
  };

  // Put fetched entries into this.data; with append, only steps after what is held.
  Board.prototype.store = function (entries, append) {
    var self = this;
    var grew = false;
    entries.forEach(function (entry) {
      var key = metricKey(entry.group, entry.name);
      if (!self.selected[key]) {
        return;
      }
      var byTrial = self.data[key] || (self.data[key] = {});
      var held = byTrial[entry.trial_id];
      if (!append || !held) {
        byTrial[entry.trial_id] = entry;
        grew = true;
        return;
      }
      var start = 0;
      while (start < entry.steps.length && entry.steps[start] <= held.last_step) {
        start += 1;
      }
      if (start < entry.steps.length) {
        ["steps", "values", "epochs", "elapsed_seconds", "min", "max"].forEach(function (field) {
          // A raw tail (not downsampled) has no min / max: each point is its own extremes.
          var more = entry[field] || ((field === "min" || field === "max") && entry.values);
          if (held[field] && more) {
            held[field] = held[field].concat(more.slice(start));
          }
        });
        self.appended += entry.steps.length - start;
        grew = true;
      }
      held.last_step = Math.max(held.last_step, entry.last_step);
    });
    return grew;
  };

  Board.prototype.setStatus = function (text) {
    if (this.status) {
      this.status.textContent = text;
    }
  };

  // The step range [lo, hi] that covers x in [a, b] in the overview data (any x-axis).
  Board.prototype.stepWindow = function (key, a, b) {
    var self = this;
    if (this.xAxis === "batches") {
      return [Math.max(0, Math.floor(a)), Math.max(0, Math.ceil(b))];
    }
    var lo = null;
    var hi = null;
    var byTrial = this.data[key] || {};
    Object.keys(byTrial).forEach(function (id) {
      var entry = byTrial[id];
      var x = T.xValues(entry, self.xAxis);
      for (var i = 0; i < entry.steps.length; i++) {
        if (x[i] === null || x[i] === undefined) {
          continue;
        }
        // One point beyond each edge, so the zoomed lines reach the frame.
        if (x[i] >= a || (i + 1 < x.length && x[i + 1] >= a)) {
          if (x[i] <= b || (i > 0 && x[i - 1] <= b)) {
            lo = lo === null ? entry.steps[i] : Math.min(lo, entry.steps[i]);
            hi = hi === null ? entry.steps[i] : Math.max(hi, entry.steps[i]);
          }
        }
      }
    });
    return lo === null ? null : [lo, hi];
  };

  Board.prototype.onRelayout = function (key, event) {
    var self = this;
    if (this.plots[key].dataset.rendering) {
      return;
    }
    if (event["xaxis.autorange"]) {
      if (this.zoom[key]) {
        delete this.zoom[key];
        this.render(key);
      }
      return;
    }
    var a = event["xaxis.range[0]"];
    var b = event["xaxis.range[1]"];
    if (a === undefined && event["xaxis.range"]) {
      a = event["xaxis.range"][0];
      b = event["xaxis.range"][1];
    }
    if (a === undefined || b === undefined) {
      return;
    }
    var steps = this.stepWindow(key, Number(a), Number(b));
    if (!steps) {
      return;
    }
    var group = key.slice(0, key.indexOf("/"));
    var params = {
      group: group,
      name: key.slice(key.indexOf("/") + 1),
      x_min: steps[0],
      x_max: steps[1],
      max_points: clamp(Math.floor(POINT_BUDGET / Math.max(1, this.trials.length)), 200, MAX_POINTS),
      band: "true",
    };
    if (this.xAxis !== "batches") {
      params.x_axis = this.xAxis;
    }
    var div = this.plots[key];
    div.dataset.zoom = "loading";
    this.fetchSeries(params).then(function (entries) {
      var data = {};
      entries.forEach(function (entry) {
        if (entry.group === group) {
          data[entry.trial_id] = entry;
        }
      });
      self.zoom[key] = { steps: steps, data: data };
      self.render(key);
      div.dataset.zoom = steps[0] + "-" + steps[1];
    }).catch(function () {
      div.dataset.zoom = "failed";
    });
  };

  return { Board: Board, ema: T.ema, metricKey: metricKey };
})();
