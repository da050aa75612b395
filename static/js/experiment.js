// Experiment page: draw the metric charts (static/js/charts.js), then poll the live endpoint
// while the experiment runs. Polling, not a single-page app: the server answers an `updated`
// token and re-sends the trials table and the metric list only when that token changed; then the
// charts fetch only the points after what they hold (after_step) and redraw in place, keeping the
// user's zoom, hidden traces and chart options (layout.uirevision). A failed poll is never silent: an
// expired session or a lost connection shows #live-banner (polls back off meanwhile, and stop
// while the tab is hidden); the next good poll hides it.
(function () {
  "use strict";
  var root = document.getElementById("experiment");
  var options = JSON.parse(document.getElementById("metrics-options").textContent);
  var token = root.dataset.updated;
  var terminal = root.dataset.terminal === "true";
  var banner = document.getElementById("live-banner");

  // The trials table is the legend here (hw:trials-visible, hw:trial-colors, hw:trial-hover);
  // the charts offer "group by <hparam>".
  options.legend = false;
  options.groupBy = true;
  options.onError = function (error) {
    showBanner(error && error.kind === "session" ? "session" : "connection");
  };
  var board = new HeadwayCharts.Board(document.getElementById("metrics-board"), options);
  board.reload();

  function badge(state) {
    var span = document.createElement("span");
    span.className = "badge state-" + state.toLowerCase();
    span.textContent = state;
    return span;
  }

  function showSummary(data) {
    var state = document.getElementById("experiment-state");
    state.replaceChildren(badge(data.state));
    var percent = Math.round(data.progress * 100);
    var progress = document.querySelector("#experiment-progress .progress");
    progress.title = percent + "%";
    progress.querySelector(".progress-bar").style.width = percent + "%";
    progress.querySelector(".progress-label").textContent = percent + "%";
    if (data.best_validation !== null) {
      HeadwayFormat.fill(document.getElementById("experiment-best"), data.best_validation);
    }
  }

  // A half-filled "Continue trial" form must not be wiped by a live swap: while one is open or
  // focused, the update waits (the token is kept, so the next poll brings it again).
  function trialsBusy() {
    var trials = document.getElementById("trials");
    var active = document.activeElement;
    return Boolean(
      trials.querySelector("details[open]") ||
        (active && active.form && active.type !== "checkbox" && trials.contains(active))
    );
  }

  // kind: "session" (the live URL answered with the login page, or 401/403) or "connection"
  // (network error, 5xx, anything else); null hides the banner.
  function showBanner(kind) {
    if (!banner) {
      return;
    }
    if (kind === null) {
      banner.hidden = true;
      banner.replaceChildren();
      return;
    }
    if (kind === "session") {
      var link = document.createElement("a");
      link.href = banner.dataset.loginUrl;
      link.textContent = "log in again";
      banner.replaceChildren("Your session expired \u2014 ", link, " to see live updates.");
    } else {
      banner.replaceChildren("Connection lost, retrying\u2026 This page may be out of date.");
    }
    banner.dataset.kind = kind;
    banner.hidden = false;
  }

  function tick() {
    var url = root.dataset.liveUrl + "?since=" + encodeURIComponent(token);
    return HeadwayLive.getJSON(url).then(function (data) {
      showBanner(null);
      showSummary(data);
      var pending = data.updated !== token;
      // Charts never wait for a busy form: their poll only appends what is new.
      if (pending && data.metrics) {
        board.bestTrialId = data.best_trial_id;
        if (board.setMetrics(data.metrics)) {
          board.reload();
        } else {
          board.poll().catch(function () {});
        }
      }
      if (pending && !trialsBusy()) {
        if (data.trials_html !== null) {
          TrialsTable.replace(document.getElementById("trials"), data.trials_html);
        }
        // The control buttons follow the new state (e.g. Activate once PAUSED).
        if (data.controls_html !== null) {
          document.getElementById("experiment-controls").innerHTML = data.controls_html;
        }
        token = data.updated;
        root.dataset.updated = token;
        pending = false;
      }
      // An update waiting for a busy form keeps the polling alive even once the run ended.
      terminal = data.terminal && !pending;
      root.dataset.terminal = terminal ? "true" : "false";
      return !terminal;
    });
  }

  if (!terminal) {
    HeadwayLive.poll(tick, {
      onError: function (error) {
        showBanner(error && error.kind === "session" ? "session" : "connection");
      },
    });
  }
})();
