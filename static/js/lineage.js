// Trial page of a continued trial: the parent's series (a second source of the metric board,
// dashboard/lineage.py) are drawn dashed. charts.js has no per-trial line style, so after each
// draw of a chart (plotly_afterplot) the parent's traces are restyled with line.dash = "dash";
// traces already dashed are left alone, so the restyle's own redraw ends there.
(function () {
  "use strict";
  var script = document.getElementById("metrics-options");
  var charts = document.querySelector("#metrics-board .metric-charts");
  if (!script || !charts) {
    return;
  }
  var parentId = JSON.parse(script.textContent).parentTrialId;
  if (typeof parentId !== "number") {
    return;
  }

  function dashParent(div) {
    var indices = [];
    (div.data || []).forEach(function (trace, index) {
      var meta = trace.meta || {};
      if (meta.trial_id === parentId && !(trace.line && trace.line.dash === "dash")) {
        indices.push(index);
      }
    });
    if (indices.length) {
      Plotly.restyle(div, { "line.dash": "dash" }, indices);
    }
  }

  function bind(div) {
    if (div.dataset.lineageBound || typeof div.on !== "function") {
      return;
    }
    div.dataset.lineageBound = "1";
    // After the draw that emitted the event has finished (a restyle inside it breaks Plotly).
    div.on("plotly_afterplot", function () {
      setTimeout(function () { dashParent(div); }, 0);
    });
    setTimeout(function () { dashParent(div); }, 0);
  }

  // Plotly marks a chart's div with .js-plotly-plot when it first draws it.
  new MutationObserver(function () {
    charts.querySelectorAll(".js-plotly-plot").forEach(bind);
  }).observe(charts, { subtree: true, childList: true, attributes: true, attributeFilter: ["class"] });
  charts.querySelectorAll(".js-plotly-plot").forEach(bind);
})();
