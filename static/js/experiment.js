// Experiment page: draw the metric charts (static/js/charts.js), then poll the live endpoint
// while the experiment runs. Polling, not a SPA (STYLE.md §9): the server answers an `updated`
// token and re-sends the trials table and the metric list only when that token changed; then the
// charts fetch only the points after what they hold (after_step) and redraw in place, keeping the
// user's zoom, hidden traces and chart options (layout.uirevision). A failed poll is never silent: an
// expired session or a lost connection shows #live-banner (polls back off meanwhile, and stop
// while the tab is hidden); the next good poll hides it.
(function () {
  "use strict";
  var POLL_MS = 3000;
  var MAX_BACKOFF_MS = 30000;
  var root = document.getElementById("experiment");
  var options = JSON.parse(document.getElementById("metrics-options").textContent);
  var token = root.dataset.updated;
  var terminal = root.dataset.terminal === "true";
  var timer = null;
  var inFlight = false;
  var failures = 0;
  var banner = document.getElementById("live-banner");

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
      document.getElementById("experiment-best").textContent =
        Number(data.best_validation.toPrecision(6)).toString();
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

  function isLoginPage(response) {
    var login = banner ? new URL(banner.dataset.loginUrl, window.location.href).pathname : null;
    return Boolean(login && new URL(response.url).pathname === login);
  }

  function schedule(delay) {
    clearTimeout(timer);
    timer = null;
    if (!terminal && !document.hidden) {
      timer = setTimeout(poll, delay);
    }
  }

  function poll() {
    if (inFlight || terminal || document.hidden) {
      return;
    }
    inFlight = true;
    var url = root.dataset.liveUrl + "?since=" + encodeURIComponent(token);
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        // login_required answers an expired session with a redirect to the login page.
        if (response.status === 401 || response.status === 403 ||
            (response.redirected && isLoginPage(response))) {
          var expired = new Error("session expired");
          expired.kind = "session";
          throw expired;
        }
        if (!response.ok || response.redirected) {
          throw new Error("live update failed: " + response.status);
        }
        return response.json();
      })
      .then(function (data) {
        failures = 0;
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
      })
      .catch(function (error) {
        failures += 1;
        showBanner(error && error.kind === "session" ? "session" : "connection");
      })
      .finally(function () {
        inFlight = false;
        schedule(Math.min(POLL_MS * Math.pow(2, failures), MAX_BACKOFF_MS));
      });
  }

  // Hidden tabs do not poll; coming back polls at once.
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      clearTimeout(timer);
      timer = null;
    } else {
      poll();
    }
  });

  schedule(POLL_MS);
})();
