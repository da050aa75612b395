// The colours of the experiment page's trials (static/js/trials_legend.js asks): by trial, by
// the searcher metric or by a hyperparameter, and the scale the colour legend shows.
//
// From MERGE_FROM trials on, colours come from a small set (PALETTE by trial, VIRIDIS_STEPS
// steps of Viridis for a number, Kelly's 20 for categories, repeating): the charts join the
// lines of one colour into one Plotly trace (static/js/chart_traces.js, "merged"), so a chart
// is a dozen traces whatever the number of trials (docs/decisions/dashboard.md).
window.TrialColors = (function () {
  "use strict";
  var NO_VALUE = "#9a9a9a"; // trials without a value of the coloured quantity
  // Viridis (matplotlib's perceptual scale), as plotly's "Viridis" colorscale defines it.
  var VIRIDIS = [
    "#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e", "#26828e",
    "#21918c", "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b", "#addc30", "#d8e219",
    "#fde725",
  ];
  // Kelly's 22 colours of maximum contrast without white and black: 20 categories, no repeat.
  var CATEGORICAL = [
    "#f3c300", "#875692", "#f38400", "#a1caf1", "#be0032", "#c2b280", "#848482", "#008856",
    "#e68fac", "#0067a5", "#f99379", "#604e97", "#f6a600", "#b3446c", "#dcd300", "#882d17",
    "#8db600", "#654522", "#e25822", "#2b3d26",
  ];

  // Plotly's default colorway: the colours of the many-trials path.
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf"];
  var MERGE_FROM = 20; // trials from which colours come from a small set (chart_traces FAST_FROM)
  var VIRIDIS_STEPS = 9;

  // The trials being coloured ([{id, value, hparams}]) and the scale found, during colorsFor.
  var trials = [];
  var scale = null;

  function hex2(n) {
    var s = Math.round(Math.max(0, Math.min(255, n))).toString(16);
    return s.length === 1 ? "0" + s : s;
  }

  function rgb(hex) {
    return [1, 3, 5].map(function (i) { return parseInt(hex.slice(i, i + 2), 16); });
  }

  // t in [0, 1] -> a Viridis colour, linear between the scale's stops.
  function viridis(t) {
    var x = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
    var i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    var a = rgb(VIRIDIS[i]);
    var b = rgb(VIRIDIS[i + 1]);
    var f = x - i;
    return "#" + [0, 1, 2].map(function (k) { return hex2(a[k] + (b[k] - a[k]) * f); }).join("");
  }

  // One hue per trial id, turned by the golden angle: neighbours differ most, none repeats.
  function trialColor(id) {
    var h = (id * 137.508) % 360;
    var s = 0.65;
    var l = 0.45;
    var c = (1 - Math.abs(2 * l - 1)) * s;
    var hp = h / 60;
    var x = c * (1 - Math.abs((hp % 2) - 1));
    var rgb1 = hp < 1 ? [c, x, 0] : hp < 2 ? [x, c, 0] : hp < 3 ? [0, c, x] :
      hp < 4 ? [0, x, c] : hp < 5 ? [x, 0, c] : [c, 0, x];
    var m = l - c / 2;
    return "#" + rgb1.map(function (v) { return hex2((v + m) * 255); }).join("");
  }

  function isNumber(v) {
    return typeof v === "number" && isFinite(v);
  }

  // Continuous colours for numbers (log scale when positive over 2+ decades), else categories.
  function many() {
    return trials.length >= MERGE_FROM;
  }

  // t in [0, 1] -> Viridis; with many trials, snapped to the centre of one of VIRIDIS_STEPS bins.
  function ramp(t) {
    if (!many()) {
      return viridis(t);
    }
    var bin = Math.min(VIRIDIS_STEPS - 1, Math.floor(Math.max(0, Math.min(1, t)) * VIRIDIS_STEPS));
    return viridis((bin + 0.5) / VIRIDIS_STEPS);
  }

  function colorByValues(valueOf) {
    var values = trials.map(function (t) { return valueOf(t); });
    var present = values.filter(function (v) { return v !== null && v !== undefined; });
    var out = {};
    if (present.length && present.every(isNumber)) {
      var min = Math.min.apply(null, present);
      var max = Math.max.apply(null, present);
      var log = min > 0 && max / min >= 100;
      var f = log ? Math.log : function (v) { return v; };
      var span = f(max) - f(min);
      trials.forEach(function (t, i) {
        var v = values[i];
        out[t.id] = isNumber(v) ? ramp(span > 0 ? (f(v) - f(min)) / span : 0.5) : NO_VALUE;
      });
      scale = { kind: "continuous", min: min, max: max, log: log };
      return out;
    }
    var distinct = [];
    present.forEach(function (v) {
      var key = String(v);
      if (distinct.indexOf(key) < 0) {
        distinct.push(key);
      }
    });
    distinct.sort();
    var palette = distinct.length <= CATEGORICAL.length || many() ? CATEGORICAL : null;
    trials.forEach(function (t, i) {
      var v = values[i];
      if (v === null || v === undefined) {
        out[t.id] = NO_VALUE;
        return;
      }
      var k = distinct.indexOf(String(v));
      // More categories than the palette: golden-angle hues (distinct, no repeats).
      out[t.id] = palette ? palette[k % palette.length] : trialColor(k + 1);
    });
    scale = {
      kind: "categorical",
      values: distinct.map(function (v, k) {
        return { value: v, color: palette ? palette[k % palette.length] : trialColor(k + 1) };
      }),
    };
    return out;
  }

  // The colour of every trial for "Colour by" ``by`` ("" by trial, "metric", "hp:<name>"),
  // and what the colour legend shows: {colors: {id: "#rrggbb"}, scale: null |
  // {kind: "continuous", min, max, log} | {kind: "categorical", values: [{value, color}]}}.
  function colorsFor(rows, by) {
    trials = rows;
    scale = null;
    var colors;
    if (by === "metric") {
      colors = colorByValues(function (t) { return t.value; });
    } else if (by.indexOf("hp:") === 0) {
      var key = by.slice(3);
      colors = colorByValues(function (t) {
        return Object.prototype.hasOwnProperty.call(t.hparams, key) ? t.hparams[key] : null;
      });
    } else {
      colors = {};
      trials.forEach(function (t, i) {
        colors[t.id] = many() ? PALETTE[i % PALETTE.length] : trialColor(t.id);
      });
    }
    return { colors: colors, scale: scale };
  }

  return {
    NO_VALUE: NO_VALUE,
    VIRIDIS: VIRIDIS,
    colorsFor: colorsFor,
    isNumber: isNumber,
    trialColor: trialColor,
    viridis: viridis,
  };
})();
