// Experiment list: while a listed experiment has not ended, poll /experiments/live?id=... every
// 3 s and update the live columns (state badge, progress, active / total trials, best value)
// in place. Backs off on errors, stops while the tab is hidden and once every row has ended.
(function () {
  "use strict";
  var POLL_MS = 3000;
  var MAX_BACKOFF_MS = 30000;
  var TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  var table = document.querySelector("table.experiments[data-live-url]");
  if (!table) {
    return;
  }
  var failures = 0;
  var timer = null;

  function liveIds() {
    var ids = [];
    table.querySelectorAll("tr[data-experiment]").forEach(function (row) {
      var badge = row.querySelector("[data-field=state] .badge");
      if (badge && TERMINAL.indexOf(badge.textContent.trim()) < 0) {
        ids.push(row.dataset.experiment);
      }
    });
    return ids;
  }

  function update(exp) {
    var row = table.querySelector("tr[data-experiment='" + exp.id + "']");
    if (!row) {
      return;
    }
    var badge = row.querySelector("[data-field=state] .badge");
    badge.className = "badge state-" + exp.state.toLowerCase();
    badge.textContent = exp.state;
    var percent = Math.round(exp.progress * 100);
    var progress = row.querySelector("[data-field=progress] .progress");
    progress.title = percent + "%";
    progress.querySelector(".progress-bar").style.width = percent + "%";
    progress.querySelector(".progress-label").textContent = percent + "%";
    row.querySelector("[data-field=trials]").textContent =
      exp.active_trials + " / " + exp.num_trials;
    if (exp.best_validation !== null) {
      row.querySelector("[data-field=best]").textContent =
        Number(exp.best_validation.toPrecision(6)).toString();
    }
  }

  function poll() {
    timer = null;
    var ids = liveIds();
    if (!ids.length) {
      return;
    }
    var query = ids.map(function (id) { return "id=" + encodeURIComponent(id); }).join("&");
    fetch(table.dataset.liveUrl + "?" + query, {
      headers: { Accept: "application/json" }, credentials: "same-origin",
    }).then(function (response) {
      if (!response.ok || response.redirected) {
        throw new Error("list update failed: " + response.status);
      }
      return response.json();
    }).then(function (data) {
      failures = 0;
      data.experiments.forEach(update);
    }).catch(function () {
      failures += 1;
    }).finally(function () {
      schedule();
    });
  }

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (!document.hidden && liveIds().length) {
      timer = setTimeout(poll, Math.min(POLL_MS * Math.pow(2, failures), MAX_BACKOFF_MS));
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      clearTimeout(timer);
      timer = null;
    } else if (!timer) {
      poll();
    }
  });
  schedule();
})();
