// Plotly traces of the metric charts (static/js/charts.js): pure functions from series to traces.
//
// A chart is a list of "lines" ({id, x, y, lo?, hi?, color, width, name, opacity?, meta}),
// always drawn as plain lines (mode "lines", no markers; only a point with no neighbour to
// join gets a dot, in a `markers` trace of its own), packed into Plotly traces by one of four modes:
// - "svg": one `scatter` per line (the small-board path: trial and compare pages, legends);
// - "gl": one `scattergl` per line;
// - "merged": one `scatter` per colour and width, its lines joined by `null` separators;
// - "merged-gl": the same with `scattergl`.
// Which mode draws many trials fastest was measured in Chromium (bench/dashboard.py,
// docs/decisions/dashboard.md): FAST_MODE from FAST_FROM lines (GL_FROM: "gl" never by default). Lines with lo / hi (a downsampled series in the band shape, or
// a group's range) get a shaded band under them: one `toself`-filled polygon per line, joined
// per colour into one trace (all in one grey trace from FAST_FROM lines on).
window.HeadwayChartTraces = (function () {
  "use strict";

  // Plotly's default colorway: the same trial has the same colour in every chart.
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf"];
  var MODES = ["svg", "gl", "merged", "merged-gl"];
  var FAST_MODE = "merged";
  var FAST_FROM = 20; // lines per chart from which FAST_MODE draws
  // Lines per chart from which "gl" would draw: never by default. Measured in headless
  // Chromium (software WebGL), merged SVG was as fast or faster at 1,000 trials in 3 of 4 runs.
  var GL_FROM = Infinity;
  var GROUP_GRID = 200;
  var BAND_GREY = "#7f7f7f"; // the bands' fill in the many-lines path (at 18% opacity) // x positions at which a group's mean and range are computed

  // TensorBoard's smoothing: an exponential moving average debiased for its zero start, so the
  // first points are not pulled toward 0. Gaps (null: NaN/inf) stay gaps and do not advance it.
  function ema(values, weight) {
    if (!(weight > 0)) {
      return values.slice();
    }
    var out = new Array(values.length);
    var last = 0;
    var count = 0;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null || v === undefined || !isFinite(v)) {
        out[i] = null;
        continue;
      }
      last = last * weight + (1 - weight) * v;
      count += 1;
      out[i] = last / (1 - Math.pow(weight, count));
    }
    return out;
  }

  // Plotly renders hover text as a subset of HTML: user strings must not be read as tags.
  function escapeHtml(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function xValues(entry, xAxis) {
    if (xAxis === "epochs") {
      return entry.epochs || [];
    }
    if (xAxis === "time") {
      return entry.elapsed_seconds || [];
    }
    return entry.steps;
  }

  // "#rrggbb" -> "rgba(r,g,b,alpha)" (a band's fill).
  function fade(color, alpha) {
    var m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color || "");
    if (!m) {
      return color;
    }
    return "rgba(" + parseInt(m[1], 16) + "," + parseInt(m[2], 16) + "," + parseInt(m[3], 16) +
      "," + alpha + ")";
  }

  // The band of one line as closed polygons: x forth then back, hi forth then lo back; a point
  // without lo / hi (a gap) ends one polygon. Returns {x, y} with null between polygons.
  function bandPolygons(line, out) {
    var start = 0;
    var n = line.x.length;
    function close(from, to) {
      if (to - from < 1) {
        return;
      }
      if (out.x.length) {
        out.x.push(null);
        out.y.push(null);
      }
      var i;
      for (i = from; i < to; i++) {
        out.x.push(line.x[i]);
        out.y.push(line.hi[i]);
      }
      for (i = to - 1; i >= from; i--) {
        out.x.push(line.x[i]);
        out.y.push(line.lo[i]);
      }
    }
    for (var i = 0; i <= n; i++) {
      var ok = i < n && line.lo[i] !== null && line.hi[i] !== null && line.x[i] !== null &&
        line.x[i] !== undefined;
      if (!ok) {
        close(start, i);
        start = i + 1;
      }
    }
  }

  // One band trace per colour; `neutral` (the many-lines path) puts every band in one grey
  // trace: a hundred translucent coloured bands are mud, and each trace costs a draw.
  function bandTraces(lines, neutral) {
    var byColor = {};
    var order = [];
    lines.forEach(function (line) {
      if (!line.lo || !line.hi) {
        return;
      }
      var color = neutral ? BAND_GREY : line.color;
      if (!byColor[color]) {
        byColor[color] = { x: [], y: [] };
        order.push(color);
      }
      bandPolygons(line, byColor[color]);
    });
    return order.filter(function (color) { return byColor[color].x.length; }).map(function (color) {
      return {
        type: "scatter", mode: "lines", x: byColor[color].x, y: byColor[color].y,
        fill: "toself", fillcolor: fade(color, 0.18), line: { width: 0, color: color },
        hoverinfo: "skip", showlegend: false, connectgaps: false,
        meta: { kind: "band" },
      };
    });
  }

  // Plotly reads every key it is given: drop the undefined ones (a `marker: undefined` throws).
  function defined(trace) {
    Object.keys(trace).forEach(function (key) {
      if (trace[key] === undefined) {
        delete trace[key];
      }
    });
    return trace;
  }

  function lineTrace(line, type, hover) {
    return defined({
      type: type,
      mode: "lines",
      x: line.x,
      y: line.y,
      name: line.name,
      legendgroup: line.legendgroup,
      showlegend: line.showlegend !== false,
      opacity: line.opacity === undefined ? 1 : line.opacity,
      line: { color: line.color, width: line.width },
      connectgaps: false,
      customdata: line.id === null || line.id === undefined ? undefined :
        line.x.map(function () { return line.id; }),
      hoverinfo: line.hover === false ? "skip" : undefined,
      hovertemplate: line.hover === false ? undefined : hover,
      meta: line.meta,
    });
  }

  // Lines of one colour, width and opacity joined into one trace with null separators; the
  // trial of each point is its customdata (for the hover and hw:trial-hover).
  function mergedTraces(lines, type, hover) {
    var groups = {};
    var order = [];
    lines.forEach(function (line) {
      var key = line.color + "|" + line.width + "|" + (line.opacity || 1);
      if (!groups[key]) {
        groups[key] = [];
        order.push(key);
      }
      groups[key].push(line);
    });
    return order.map(function (key) {
      var members = groups[key];
      var first = members[0];
      var x = [];
      var y = [];
      var ids = [];
      members.forEach(function (line, n) {
        if (n) {
          x.push(null);
          y.push(null);
          ids.push(null);
        }
        for (var i = 0; i < line.x.length; i++) {
          x.push(line.x[i]);
          y.push(line.y[i]);
          ids.push(line.id);
        }
      });
      return defined({
        type: type,
        mode: "lines",
        x: x,
        y: y,
        customdata: ids,
        showlegend: false,
        opacity: first.opacity === undefined ? 1 : first.opacity,
        line: { color: first.color, width: first.width },
        connectgaps: false,
        hoverinfo: first.hover === false ? "skip" : undefined,
        hovertemplate: first.hover === false ? undefined : hover,
        meta: {
          kind: "line", merged: true,
          trial_ids: members.map(function (line) { return line.id; }),
          best: members.some(function (line) { return line.meta && line.meta.best; }),
        },
      });
    });
  }

  // A point with no finite neighbour (a series of one point, or one between two gaps) has no
  // segment to draw: such points, and only they, get a dot, one `markers` trace per colour
  // (the lines themselves stay plain lines).
  function isolatedTraces(lines, hover) {
    var byColor = {};
    var order = [];
    lines.forEach(function (line) {
      if (line.hover === false) {
        return; // the faint raw line behind a smoothed one
      }
      var y = line.y;
      for (var i = 0; i < y.length; i++) {
        var here = y[i] !== null && y[i] !== undefined;
        var before = i > 0 && y[i - 1] !== null && y[i - 1] !== undefined;
        var after = i + 1 < y.length && y[i + 1] !== null && y[i + 1] !== undefined;
        if (here && !before && !after) {
          if (!byColor[line.color]) {
            byColor[line.color] = { x: [], y: [], ids: [] };
            order.push(line.color);
          }
          byColor[line.color].x.push(line.x[i]);
          byColor[line.color].y.push(y[i]);
          byColor[line.color].ids.push(line.id);
        }
      }
    });
    return order.map(function (color) {
      var found = byColor[color];
      return {
        type: "scatter", mode: "markers", x: found.x, y: found.y, customdata: found.ids,
        marker: { color: color, size: 6 }, showlegend: false, hovertemplate: hover,
        meta: { kind: "isolated" },
      };
    });
  }

  // Traces of a chart: bands first (under), then the lines, raw (faint) ones before the rest,
  // then the dots of isolated points.
  function pack(lines, mode, hover) {
    var out = bandTraces(lines, lines.length >= FAST_FROM);
    var dots = isolatedTraces(lines, "<b>Trial %{customdata}</b><br>%{x}, %{y:.5g}<extra></extra>");
    if (mode === "merged" || mode === "merged-gl") {
      out = out.concat(mergedTraces(lines, mode === "merged" ? "scatter" : "scattergl", hover));
      return out.concat(dots);
    }
    var type = mode === "gl" ? "scattergl" : "scatter";
    return out.concat(lines.map(function (line) { return lineTrace(line, type, hover); }), dots);
  }

  // Linear interpolation of (xs, ys) at x inside [first, last] finite point; null outside.
  function sampler(xs, ys) {
    var px = [];
    var py = [];
    for (var i = 0; i < xs.length; i++) {
      if (xs[i] !== null && xs[i] !== undefined && ys[i] !== null && isFinite(ys[i])) {
        px.push(xs[i]);
        py.push(ys[i]);
      }
    }
    var j = 0;
    return function (x) { // called with increasing x
      if (!px.length || x < px[0] || x > px[px.length - 1]) {
        return null;
      }
      while (j + 1 < px.length && px[j + 1] < x) {
        j += 1;
      }
      if (px[j] === x || j + 1 >= px.length) {
        return py[j];
      }
      var t = (x - px[j]) / (px[j + 1] - px[j]);
      return py[j] + t * (py[j + 1] - py[j]);
    };
  }

  // One line per group: the mean of its members' lines with their min-max range as the band,
  // on GROUP_GRID x positions spanning every member (a member counts where it has data).
  // groups: [{name, color, lines: [{x, y}]}] -> lines with lo / hi.
  function groupLines(groups) {
    var out = [];
    groups.forEach(function (group) {
      var lo = Infinity;
      var hi = -Infinity;
      group.lines.forEach(function (line) {
        line.x.forEach(function (x) {
          if (x !== null && x !== undefined) {
            lo = Math.min(lo, x);
            hi = Math.max(hi, x);
          }
        });
      });
      if (!(hi >= lo)) {
        return;
      }
      var samplers = group.lines.map(function (line) { return sampler(line.x, line.y); });
      var n = hi > lo ? GROUP_GRID : 1;
      var x = [];
      var mean = [];
      var min = [];
      var max = [];
      for (var i = 0; i < n; i++) {
        var at = n === 1 ? lo : lo + (hi - lo) * i / (n - 1);
        var sum = 0;
        var count = 0;
        var a = Infinity;
        var b = -Infinity;
        samplers.forEach(function (sample) {
          var v = sample(at);
          if (v !== null) {
            sum += v;
            count += 1;
            a = Math.min(a, v);
            b = Math.max(b, v);
          }
        });
        x.push(at);
        mean.push(count ? sum / count : null);
        min.push(count ? a : null);
        max.push(count ? b : null);
      }
      out.push({
        id: null, x: x, y: mean, lo: min, hi: max, color: group.color, width: 2.5,
        name: group.name + " (" + group.lines.length + ")",
        meta: { kind: "line", group: group.name, trials: group.lines.length },
      });
    });
    return out;
  }

  return {
    COLORS: COLORS, MODES: MODES, FAST_MODE: FAST_MODE, FAST_FROM: FAST_FROM, GL_FROM: GL_FROM,
    ema: ema, escapeHtml: escapeHtml, xValues: xValues,
    pack: pack, groupLines: groupLines, fade: fade,
  };
})();
