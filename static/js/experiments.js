// Experiment list: while a listed experiment has not ended, poll /experiments/live?id=... every
// 3 s and update the live columns (state badge, progress, active / total trials, best value)
// in place. Backs off on errors, stops while the tab is hidden and once every row has ended.
(function () {
  "use strict";
  var TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  var table = document.querySelector("table.experiments[data-live-url]");
  if (!table) {
    return;
  }

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
      HeadwayFormat.fill(row.querySelector("[data-field=best]"), exp.best_validation);
    }
  }

  // Each tick asks only for the rows still running; none left ends the loop.
  function tick() {
    var ids = liveIds();
    if (!ids.length) {
      return false;
    }
    var query = ids.map(function (id) { return "id=" + encodeURIComponent(id); }).join("&");
    return HeadwayLive.getJSON(table.dataset.liveUrl + "?" + query).then(function (data) {
      data.experiments.forEach(update);
      return liveIds().length > 0;
    });
  }

  if (liveIds().length) {
    HeadwayLive.poll(tick);
  }
})();
