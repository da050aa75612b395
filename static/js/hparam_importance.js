// Hyperparameter importance for the searcher metric (experiment page, _hparams.html): a bar per
// hyperparameter, most important on top, from GET /api/v1/experiments/{id}/hparam-importance/
// (registry/hparam_importance.py: a random forest's impurity importance, W&B's method). The hover
// adds each numeric hyperparameter's correlation with the metric. The fit runs in the master's
// worker: while it is queued or running (202), or every fit slot is busy (429), a sentence says
// so and the request is repeated after the answer's Retry-After. Another 4xx answer (too few
// trials with a value yet, a failed fit) is shown as its sentence in place of the chart. Fetched
// once the chart nears the viewport.
(function () {
  "use strict";
  var views = document.getElementById("hparam-views");
  var target = document.getElementById("hparam-importance");
  if (!views || !target || typeof Plotly === "undefined") {
    return;
  }
  var D3 = window.HeadwayFormat ? window.HeadwayFormat.D3 : ".4~g";
  var chart = target;
  var answer = null;

  function plain(text) {
    return String(text).replace(/[<>&%{}]/g, "");
  }

  // Repeated 202/429 answers are asked again at most this many times (~4 minutes at the
  // server's Retry-After of 2 s), then the page says to come back.
  var MAX_POLLS = 120;
  var polls = 0;

  function showMessage(text) {
    if (target !== chart) { // a message already: the same element says the next one
      target.textContent = text;
      return;
    }
    var p = document.createElement("p");
    p.className = "muted";
    p.id = "hparam-importance";
    p.textContent = text;
    target.replaceWith(p);
    target = p;
  }

  // The chart's own div again once a message took its place (Plotly draws into it).
  function chartTarget() {
    if (target !== chart) {
      target.replaceWith(chart);
      target = chart;
    }
    return chart;
  }

  function draw() {
    var rows = answer.hparams.slice().reverse(); // Plotly stacks bars bottom-up
    // The theme (chart_config.js) sets the colours but the bars', which follow --accent.
    var accent = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() ||
      "#1f77b4";
    return HeadwayChartConfig.react(chartTarget(), [{
      type: "bar",
      orientation: "h",
      x: rows.map(function (h) { return h.importance; }),
      y: rows.map(function (h) { return plain(h.name); }),
      customdata: rows.map(function (h) {
        return h.correlation === null ? "\u2013 (categorical)" : window.HeadwayFormat ?
          window.HeadwayFormat.number(h.correlation) : String(h.correlation);
      }),
      hovertemplate: "%{y}<br>importance %{x:" + D3 + "}<br>correlation %{customdata}<extra></extra>",
      marker: { color: accent },
    }], {
      margin: { l: 140, r: 20, t: 10, b: 40 },
      height: Math.max(140, 40 + 28 * rows.length),
      xaxis: { title: { text: "importance (" + answer.trials + " trials)" }, rangemode: "tozero" },
      yaxis: { automargin: true },
    }, { responsive: true, displaylogo: false });
  }

  function load() {
    fetch(views.dataset.importanceUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (body) {
          return { ok: response.ok, status: response.status, body: body,
            retryAfter: Number(response.headers.get("Retry-After")) || 2 };
        });
      })
      .then(function (result) {
        if (result.status === 202 || result.status === 429) {
          polls += 1;
          if (polls > MAX_POLLS) {
            showMessage("Importance is still being computed; reload the page later.");
            return;
          }
          showMessage(result.status === 202 ? "Computing importance\u2026" :
            "Importance is waiting for a free worker\u2026");
          window.setTimeout(load, result.retryAfter * 1000);
        } else if (!result.ok) {
          showMessage(result.body.detail || "Importance is not available.");
        } else if (!result.body.hparams.length) {
          showMessage("No hyperparameter varies between the trials with a value.");
        } else {
          answer = result.body;
          draw();
        }
      })
      .catch(function () {
        showMessage("Importance could not be loaded.");
      });
  }

  // The fit costs worker time (seconds at 1,000 trials): asked for only when the chart is about
  // to scroll into view, so a page never scrolled that far queues no fit.
  if ("IntersectionObserver" in window) {
    var observer = new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) {
        observer.disconnect();
        load();
      }
    }, { rootMargin: "300px" });
    observer.observe(target);
  } else {
    load();
  }
  document.addEventListener("hw:theme", function () {
    if (answer) {
      draw();
    }
  });
})();
