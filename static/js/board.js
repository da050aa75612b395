// Charts of the trial and compare pages (static/js/charts.js). On a trial page of a trial that
// has not ended (section[data-live-url]), poll every 3 s: the trial's REST detail refreshes the
// state, batches and best validation, and the charts fetch only their new points. Polls back off
// on errors and stop while the tab is hidden or once the trial ends.
(function () {
  "use strict";
  var TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  var root = document.getElementById("metrics-board");
  var script = document.getElementById("metrics-options");
  if (!root || !script) {
    return;
  }
  var board = new HeadwayCharts.Board(root, JSON.parse(script.textContent));
  board.reload();

  var section = document.querySelector("section[data-live-url]");
  if (!section || section.dataset.terminal === "true") {
    return;
  }

  function setText(id, text) {
    var el = document.getElementById(id);
    if (el && text !== null && text !== undefined) {
      el.textContent = text;
    }
  }

  function tick() {
    return HeadwayLive.getJSON(section.dataset.liveUrl).then(function (trial) {
      var state = document.querySelector("#trial-state .badge");
      if (state) {
        state.className = "badge state-" + trial.state.toLowerCase();
        state.textContent = trial.state;
      }
      setText("trial-steps", String(trial.steps_completed));
      if (trial.best_validation !== null) {
        HeadwayFormat.fill(document.getElementById("trial-best"), Number(trial.best_validation));
      }
      return board.poll().then(function () {
        var ended = TERMINAL.indexOf(trial.state) >= 0;
        section.dataset.terminal = ended ? "true" : "false";
        return !ended;
      });
    });
  }

  HeadwayLive.poll(tick);
})();
