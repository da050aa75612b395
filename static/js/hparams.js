// Hyperparameter views of a search (experiment page): parallel coordinates (each hyperparameter
// that varies, then the searcher metric; lines coloured by the metric) and one scatter per
// hyperparameter (value against the trial's best searcher metric). Data: #hparam-data
// (dashboard.overview.hparam_data). Text values become categorical axes.
(function () {
  "use strict";
  var script = document.getElementById("hparam-data");
  if (!script || typeof Plotly === "undefined") {
    return;
  }
  var data = JSON.parse(script.textContent);
  var config = { responsive: true, displaylogo: false };
  var scored = data.trials.filter(function (t) { return t.value !== null; });

  function isNumeric(name) {
    return data.trials.every(function (t) {
      var v = t.hparams[name];
      return v === null || v === undefined || typeof v === "number";
    });
  }

  function dimension(name, trials) {
    var values = trials.map(function (t) { return t.hparams[name]; });
    if (isNumeric(name)) {
      return { label: name, values: values.map(function (v) { return v === undefined ? null : v; }) };
    }
    var categories = [];
    values.forEach(function (v) {
      var text = v === null || v === undefined ? "(none)" : String(v);
      if (categories.indexOf(text) < 0) {
        categories.push(text);
      }
    });
    categories.sort();
    return {
      label: name,
      tickvals: categories.map(function (_, i) { return i; }),
      ticktext: categories,
      values: values.map(function (v) {
        return categories.indexOf(v === null || v === undefined ? "(none)" : String(v));
      }),
    };
  }

  // Learning rates and the like span decades: a log axis when every value is positive and the
  // largest is at least 100 times the smallest.
  function axisType(name) {
    if (!isNumeric(name)) {
      return "category";
    }
    var values = scored.map(function (t) { return t.hparams[name]; })
      .filter(function (v) { return v !== null && v !== undefined; });
    var lo = Math.min.apply(null, values);
    var hi = Math.max.apply(null, values);
    return lo > 0 && hi / lo >= 100 ? "log" : "linear";
  }

  var parcoords = document.getElementById("hparam-parcoords");
  var note = document.createElement("p");
  note.className = "muted";
  if (scored.length < 2) {
    note.textContent = "The views appear once two trials have a validation value of " +
      data.metric + ".";
    parcoords.replaceWith(note);
    return;
  }
  var metricValues = scored.map(function (t) { return t.value; });
  var dimensions = data.hparams.map(function (name) { return dimension(name, scored); });
  dimensions.push({ label: data.metric, values: metricValues });
  Plotly.newPlot(parcoords, [{
    type: "parcoords",
    dimensions: dimensions,
    line: {
      color: metricValues,
      // The better end of the metric is the darker colour either way.
      colorscale: "Viridis",
      reversescale: !data.smaller_is_better,
      showscale: true,
      colorbar: { title: { text: data.metric } },
    },
  }], { margin: { l: 60, r: 60, t: 50, b: 30 }, height: 360 }, config);

  var grid = document.getElementById("hparam-scatters");
  data.hparams.forEach(function (name) {
    var div = document.createElement("div");
    div.className = "hparam-scatter";
    div.setAttribute("role", "img");
    div.setAttribute("aria-label", data.metric + " against " + name);
    grid.appendChild(div);
    var numeric = isNumeric(name);
    Plotly.newPlot(div, [{
      type: "scatter",
      mode: "markers",
      x: scored.map(function (t) {
        var v = t.hparams[name];
        return numeric ? v : v === null || v === undefined ? "(none)" : String(v);
      }),
      y: metricValues,
      text: scored.map(function (t) { return "Trial " + t.id; }),
      hovertemplate: "%{text}<br>" + name.replace(/[<>&%{}]/g, "") + " %{x}<br>" +
        data.metric.replace(/[<>&%{}]/g, "") + " %{y:.5g}<extra></extra>",
      marker: { size: 8, color: metricValues, colorscale: "Viridis",
        reversescale: !data.smaller_is_better },
    }], {
      title: { text: name.replace(/[<>&]/g, ""), font: { size: 13 } },
      xaxis: { type: axisType(name), title: { text: name.replace(/[<>&]/g, "") } },
      yaxis: { title: { text: data.metric.replace(/[<>&]/g, "") } },
      margin: { l: 55, r: 10, t: 40, b: 45 },
      height: 260,
    }, config);
  });
})();
