// Drawing of the metric charts (HeadwayCharts.Board, static/js/charts.js): which charts are
// on screen, their traces (static/js/chart_traces.js), grouping by a hyperparameter, and the
// overview's shared events (docs/dashboard.md, "Overview events"):
// - a chart is drawn only while on screen (IntersectionObserver, 200 px ahead); data that
//   changes while it is off screen (live polls, a new filter) marks it stale, and it is drawn
//   when it scrolls in;
// - hw:trials-visible {ids} keeps only those trials, hw:trial-colors {colors, best} recolours,
//   hw:trial-hover {id, source} highlights a trial; hovering a line emits hw:trial-hover.
(function () {
  "use strict";
  var T = window.HeadwayChartTraces;
  var Board = window.HeadwayCharts.Board;
  var PLOT_CONFIG = { responsive: true, displaylogo: false };
  var HOVER_SOURCE = "metric-charts"; // this board's name in hw:trial-hover
  var X_TITLES = {
    batches: "batches (steps_completed)",
    epochs: "epochs",
    time: "wall time (seconds since the trial started)",
  };

  // Charts are drawn only on screen (200 px ahead): one scrolled in draws if its data changed.
  Board.prototype.makeObserver = function () {
    var self = this;
    if (!window.IntersectionObserver) {
      return null;
    }
    return new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        var key = entry.target.dataset.key;
        self.inView[key] = entry.isIntersecting;
        if (entry.isIntersecting && self.stale[key] && self.plots[key]) {
          self.render(key);
        }
      });
      if (self.loaded) {
        self.markDrawn();
      }
    }, { rootMargin: "200px 0px" });
  };

  // The shared events of the overview (docs/dashboard.md): which trials, their colours, hover.
  Board.prototype.listen = function () {
    var self = this;
    document.addEventListener("hw:trials-visible", function (event) {
      var ids = event.detail && event.detail.ids;
      self.visible = null;
      if (Array.isArray(ids)) {
        self.visible = {};
        ids.forEach(function (id) { self.visible[id] = true; });
      }
      self.renderAll();
    });
    document.addEventListener("hw:trial-colors", function (event) {
      var detail = event.detail || {};
      self.colors = detail.colors || {};
      if (detail.best !== undefined) {
        self.bestTrialId = detail.best;
      }
      self.renderAll();
    });
    document.addEventListener("hw:trial-hover", function (event) {
      var detail = event.detail || {};
      if (detail.source !== HOVER_SOURCE) {
        self.highlight(detail.id === undefined ? null : detail.id, null);
      }
    });
  };

  // "Group by <hparam>" in the chart controls, for hyperparameters with several values.
  Board.prototype.addGroupControl = function () {
    var self = this;
    var controls = this.root.querySelector(".chart-controls");
    var values = {};
    this.trials.forEach(function (trial) {
      trial.hparams.forEach(function (kv) {
        (values[kv[0]] = values[kv[0]] || {})[kv[1]] = true;
      });
    });
    var names = Object.keys(values).filter(function (name) {
      return Object.keys(values[name]).length > 1;
    });
    if (!controls || !names.length) {
      return;
    }
    var label = document.createElement("label");
    label.textContent = "group by ";
    var select = document.createElement("select");
    select.name = "group_by";
    [""].concat(names).forEach(function (name) {
      var option = document.createElement("option");
      option.value = name;
      option.textContent = name || "none";
      select.appendChild(option);
    });
    label.appendChild(select);
    controls.insertBefore(label, this.status || null);
    select.addEventListener("change", function () {
      self.groupBy = select.value;
      self.renderAll();
    });
  };

  Board.prototype.renderAll = function () {
    var self = this;
    if (!this.loaded || !this.ready()) {
      return; // events before the first data (the table's initial hw:trials-visible)
    }
    var keys = this.selectedKeys();
    // Drop charts of unselected metrics, add missing ones in picker order.
    Object.keys(this.plots).forEach(function (key) {
      if (keys.indexOf(key) < 0) {
        Plotly.purge(self.plots[key]);
        if (self.observer) {
          self.observer.unobserve(self.plots[key].parentNode);
        }
        self.plots[key].parentNode.remove();
        delete self.plots[key];
        delete self.stale[key];
      }
    });
    keys.forEach(function (key) {
      self.render(key);
    });
    this.root.dataset.charts = String(keys.length);
    this.markDrawn();
  };

  Board.prototype.plotFor = function (key) {
    var self = this;
    if (this.plots[key]) {
      return this.plots[key];
    }
    var figure = document.createElement("figure");
    figure.className = "metric-chart";
    figure.dataset.key = key;
    var div = document.createElement("div");
    div.className = "plot";
    div.setAttribute("role", "img");
    div.setAttribute("aria-label", "Chart of " + key + " for each trial");
    div.dataset.key = key;
    figure.appendChild(div);
    this.charts.appendChild(figure);
    this.plots[key] = div;
    if (this.observer) {
      this.observer.observe(figure);
    } else {
      this.inView[key] = true;
    }
    // Keep picker order.
    this.selectedKeys().forEach(function (k) {
      if (self.plots[k]) {
        self.charts.appendChild(self.plots[k].parentNode);
      }
    });
    return div;
  };

  Board.prototype.colorOf = function (id, index) {
    return this.colors[id] || T.COLORS[index % T.COLORS.length];
  };

  // The lines of one chart (chart_traces.js): a trial each, or a group each when grouping.
  Board.prototype.lines = function (key, byTrial) {
    var self = this;
    var smoothed = this.smoothing > 0;
    var out = [];
    var ids = Object.keys(byTrial).map(Number).sort(function (a, b) { return a - b; });
    if (this.visible) {
      ids = ids.filter(function (id) { return self.visible[id]; });
    }
    ids.forEach(function (id) {
      var entry = byTrial[id];
      var index = self.trialIndex(id);
      var trial = self.trials[index];
      var color = self.colorOf(id, index);
      var best = id === self.bestTrialId;
      var x = T.xValues(entry, self.xAxis);
      var values = entry.values;
      var name = trial.label + (best ? " \u2605 best" : "");
      if (smoothed) {
        out.push({
          id: id, x: x, y: values, color: color, width: 1, opacity: 0.25, hover: false,
          name: name + " (raw)", legendgroup: "trial-" + id, showlegend: false,
          meta: { kind: "raw", trial_id: id, raw: true },
        });
      }
      out.push({
        id: id, x: x, y: smoothed ? T.ema(values, self.smoothing) : values,
        lo: entry.min || null, hi: entry.max || null, color: color, width: best ? 3 : 1.5,
        // Plain lines, as W&B, Determined and MLflow draw them: a marker per point is an SVG
        // node per point and hides the lines' shape at 1,000 trials.
        name: name, legendgroup: "trial-" + id, trial: trial,
        meta: {
          kind: "line", trial_id: id, best: best,
          label: T.escapeHtml(trial.label) + (best ? " (best)" : ""),
          hp: trial.hparams.map(function (kv) {
            return T.escapeHtml(kv[0]) + "=" + T.escapeHtml(kv[1]);
          }).join("<br>") || "no hyperparameters",
        },
      });
    });
    // The best trial on top.
    out.sort(function (a, b) { return (a.meta.best ? 1 : 0) - (b.meta.best ? 1 : 0); });
    return this.groupBy ? this.grouped(out) : out;
  };

  // Lines of trials grouped by this.groupBy's value: mean line and min-max band per group.
  Board.prototype.grouped = function (lines) {
    var name = this.groupBy;
    var groups = {};
    lines.forEach(function (line) {
      if (line.meta.kind !== "line") {
        return;
      }
      var pair = line.trial.hparams.filter(function (kv) { return kv[0] === name; })[0];
      var value = pair ? pair[1] : "(none)";
      (groups[value] = groups[value] || []).push(line);
    });
    var values = Object.keys(groups);
    var numeric = values.every(function (v) { return v !== "" && isFinite(Number(v)); });
    values.sort(function (a, b) {
      return numeric ? Number(a) - Number(b) : a < b ? -1 : a > b ? 1 : 0;
    });
    return T.groupLines(values.map(function (value, i) {
      return {
        name: name + "=" + value, color: T.COLORS[i % T.COLORS.length], lines: groups[value],
      };
    }));
  };

  Board.prototype.modeFor = function (lines) {
    if (this.mode) {
      return this.mode;
    }
    if (this.groupBy || lines.length < T.FAST_FROM) {
      return "svg";
    }
    return lines.length >= T.GL_FROM ? "gl" : T.FAST_MODE;
  };

  // The highlighted trial's line (hover here or in the trials table), drawn on top of the rest.
  Board.prototype.highlightTrace = function (key, byTrial) {
    var entry = this.hoverId === null ? null : byTrial[this.hoverId];
    var hidden = !entry || this.groupBy || (this.visible && !this.visible[this.hoverId]);
    var color = entry ? this.colorOf(this.hoverId, this.trialIndex(this.hoverId)) : "#000000";
    var y = entry && this.smoothing > 0 ? T.ema(entry.values, this.smoothing) : entry && entry.values;
    return {
      type: "scatter", mode: "lines", x: hidden ? [] : T.xValues(entry, this.xAxis),
      y: hidden ? [] : y, line: { color: color, width: 4 }, hoverinfo: "skip",
      showlegend: false, connectgaps: false, meta: { kind: "highlight", trial_id: this.hoverId },
    };
  };

  // Highlight trial `id` (null: none) in every chart on screen but `except` (the hovered one).
  Board.prototype.highlight = function (id, except) {
    var self = this;
    this.hoverId = id;
    Object.keys(this.plots).forEach(function (key) {
      var div = self.plots[key];
      if (key === except || !self.inView[key] || !div.data || self.stale[key]) {
        return;
      }
      var zoomed = self.zoom[key];
      var trace = self.highlightTrace(key, zoomed ? zoomed.data : self.data[key] || {});
      var index = div.data.length - 1;
      if (index >= 0 && div.data[index].meta && div.data[index].meta.kind === "highlight") {
        Plotly.restyle(div, {
          x: [trace.x], y: [trace.y], "line.color": trace.line.color,
          meta: [trace.meta],
        }, [index]);
      }
    });
    this.root.dataset.hover = id === null ? "" : String(id);
  };

  Board.prototype.onHover = function (key, event, on) {
    var id = null;
    if (on && event.points && event.points.length) {
      var point = event.points[0];
      id = typeof point.customdata === "number" ? point.customdata :
        point.data.meta && typeof point.data.meta.trial_id === "number" ?
          point.data.meta.trial_id : null;
    }
    if (id === this.hoverId) {
      return;
    }
    this.highlight(id, key);
    document.dispatchEvent(new CustomEvent("hw:trial-hover", {
      detail: { id: id, source: HOVER_SOURCE },
    }));
  };

  // Whether drawing can start: Plotly (deferred, parsed after the data fetches left) and the
  // trial list (the experiment page fetches it: HeadwayTrialsData) are both there.
  Board.prototype.ready = function () {
    var self = this;
    if (typeof Plotly !== "undefined" && window.HeadwayChartConfig && !this.pendingTrials) {
      return true;
    }
    if (!this.waitingForPlotly && typeof Plotly === "undefined") {
      this.waitingForPlotly = true;
      // Fires after every deferred script ran, Plotly included.
      document.addEventListener("DOMContentLoaded", function () { self.renderAll(); });
    }
    return false;
  };

  // data-drawn on the board once every chart on screen has drawn its latest data (the browser
  // tests and bench/dashboard_scale.py wait for it): ms since navigation start.
  Board.prototype.markDrawn = function () {
    var self = this;
    var keys = this.selectedKeys();
    var latest = 0;
    var done = keys.every(function (key) {
      var div = self.plots[key];
      if (!div) {
        return false;
      }
      if (self.stale[key]) {
        // Off screen counts as done only once the observer has said so (not before its first
        // report, when every new chart is still marked stale).
        return self.inView[key] === false;
      }
      latest = Math.max(latest, Number(div.dataset.drawnAt || 0));
      return Boolean(div.dataset.drawnAt) && !div.dataset.rendering;
    });
    if (done) {
      this.root.dataset.drawn = String(latest);
      this.announceDrawn();
    } else {
      delete this.root.dataset.drawn;
    }
  };

  // hw:charts-drawn {board} once, when the board first finished drawing (or could not load):
  // the page's heavier views (parallel coordinates) wait for it so they never delay the charts.
  Board.prototype.announceDrawn = function () {
    if (this.announced) {
      return;
    }
    this.announced = true;
    document.dispatchEvent(new CustomEvent("hw:charts-drawn", { detail: { board: this.root.id } }));
  };

  Board.prototype.render = function (key) {
    var self = this;
    var div = this.plotFor(key);
    if (!this.inView[key]) {
      // Off screen: drawn when scrolled in (the observer), not on every poll meanwhile.
      this.stale[key] = true;
      div.dataset.pending = "1";
      delete div.dataset.drawnAt;
      return;
    }
    delete this.stale[key];
    delete div.dataset.pending;
    var zoomed = this.zoom[key];
    var byTrial = zoomed ? zoomed.data : this.data[key] || {};
    var lines = this.lines(key, byTrial);
    var mode = this.modeFor(lines);
    var perLine = mode === "svg" || mode === "gl";
    var hover = (perLine && !this.groupBy ?
      "<b>%{meta.label}</b><br>%{meta.hp}<br>" :
      this.groupBy ? "<b>%{meta.group}</b> mean<br>" : "<b>Trial %{customdata}</b><br>") +
      this.xAxis + " %{x}<br>" + T.escapeHtml(key) + " %{y:.5g}<extra></extra>";
    var traces = T.pack(lines, mode, hover);
    traces.push(this.highlightTrace(key, byTrial));
    var legend = perLine && (this.legend || Boolean(this.groupBy)) && lines.length > 0;
    var layout = {
      template: "plotly_white",
      title: { text: T.escapeHtml(key), font: { size: 14 } },
      // A new x-axis resets the zoom; anything else (live data, smoothing) keeps it.
      uirevision: key + "|" + this.xAxis,
      margin: { l: 60, r: 20, t: 50, b: 45 },
      xaxis: { title: { text: X_TITLES[this.xAxis] } },
      yaxis: { type: this.yType },
      showlegend: legend,
      legend: { font: { size: 11 }, groupclick: "togglegroup" },
      hovermode: "closest",
      annotations: lines.length ? [] : [{
        text: "No points for this metric", showarrow: false, xref: "paper", yref: "paper",
        x: 0.5, y: 0.5, font: { size: 14, color: "#888" },
      }],
    };
    div.dataset.rendering = "1";
    var started = performance.now();
    div.dataset.mode = this.groupBy ? "grouped" : mode;
    // Theme, shared modebar config and keyboard access: static/js/chart_config.js.
    var drawn = HeadwayChartConfig.react(div, traces, layout, PLOT_CONFIG);
    Promise.resolve(drawn).then(function () {
      delete div.dataset.rendering;
      // When it was drawn, in ms since navigation start (bench/dashboard.py reads it).
      div.dataset.drawnAt = String(Math.round(performance.now()));
      div.dataset.drawMs = String(Math.round(performance.now() - started));
      div.dataset.draws = String(Number(div.dataset.draws || 0) + 1);
      self.markDrawn();
      if (!div.dataset.bound) {
        div.dataset.bound = "1";
        div.on("plotly_relayout", function (event) { self.onRelayout(key, event); });
        div.on("plotly_hover", function (event) { self.onHover(key, event, true); });
        div.on("plotly_unhover", function (event) { self.onHover(key, event, false); });
      }
    });
  };

})();
