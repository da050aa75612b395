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

  var SYSTEM = "system"; // the system metrics' group: their own collapsed board

  // The trials table is the legend here (hw:trials-visible, hw:trial-colors, hw:trial-hover);
  // the charts offer "group by <hparam>". The trial list comes from the trials JSON
  // (trials_data.js): the series fetch leaves now, drawing waits for both.
  function boardOptions(metrics) {
    return Object.assign({}, options, {
      metrics: metrics,
      legend: false,
      groupBy: true,
      trialsPending: true,
      onError: function (error) {
        showBanner(error && error.kind === "session" ? "session" : "connection");
      },
    });
  }

  function trialEntries(data) {
    return (data ? data.trials : []).map(function (t) {
      return {
        id: t.id,
        label: "Trial " + t.id,
        hparams: Object.keys(t.hparams).map(function (k) { return [k, String(t.hparams[k])]; }),
      };
    });
  }

  var board = new HeadwayCharts.Board(document.getElementById("metrics-board"),
    boardOptions(options.metrics));
  board.reload();
  var systemBoard = null;
  var systemRoot = document.getElementById("system-board");
  var systemDetails = document.getElementById("system-metrics");
  HeadwayTrialsData.promise.then(function (data) {
    board.setTrials(trialEntries(data));
  }, function () {
    board.setTrials([]);
  });

  // The system board is made, fetched and drawn only when its section is opened.
  if (systemDetails && systemRoot) {
    systemDetails.addEventListener("toggle", function () {
      if (!systemDetails.open || systemBoard) {
        return;
      }
      systemBoard = new HeadwayCharts.Board(systemRoot, boardOptions(options.system || []));
      systemBoard.reload();
      HeadwayTrialsData.promise.then(function (data) {
        systemBoard.setTrials(trialEntries(data));
      }, function () {
        systemBoard.setTrials([]);
      });
      // The legend's current state (its events went out before this board existed).
      var now = TrialsLegend.current();
      document.dispatchEvent(new CustomEvent("hw:trial-colors", {
        detail: { colors: now.colors, best: now.best },
      }));
      document.dispatchEvent(new CustomEvent("hw:trials-visible", { detail: { ids: now.ids } }));
    });
  }

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
    var view = TrialsTable.view();
    var url = root.dataset.liveUrl + "?since=" + encodeURIComponent(token) +
      "&page=" + encodeURIComponent(view.page || "1") + "&sort=" + encodeURIComponent(view.sort || "") +
      "&filter=" + encodeURIComponent(view.filter || "") + "&columns=" + encodeURIComponent(view.columns || "");
    return HeadwayLive.getJSON(url).then(function (data) {
      showBanner(null);
      showSummary(data);
      var pending = data.updated !== token;
      // Charts never wait for a busy form: their poll only appends what is new.
      if (pending && data.metrics) {
        var main = data.metrics.filter(function (m) { return m.group !== SYSTEM; });
        board.bestTrialId = data.best_trial_id;
        if (board.setMetrics(main)) {
          board.reload();
        } else {
          board.poll().catch(function () {});
        }
        if (systemBoard) {
          var system = data.metrics.filter(function (m) { return m.group === SYSTEM; });
          if (systemBoard.setMetrics(system)) {
            systemBoard.reload();
          } else {
            systemBoard.poll().catch(function () {});
          }
        }
      }
      // New trials: fetch the trial list again (the legend, hover labels and parcoords read it).
      if (pending && data.trial_count !== HeadwayTrialsData.count) {
        HeadwayTrialsData.refresh().then(function (fresh) {
          var entries = trialEntries(fresh);
          board.setTrials(entries);
          if (systemBoard) {
            systemBoard.setTrials(entries);
          }
        }, function () {});
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
