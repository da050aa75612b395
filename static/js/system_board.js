// Trial page: the system-metrics board (metric group "system": CPU, memory, GPU, throughput;
// dashboard/lineage.py), drawn against wall time by default. While the trial runs it fetches
// new points every 10 s (the sampler's default interval), as board.js does for the metrics.
(function () {
  "use strict";
  var root = document.getElementById("system-board");
  var script = document.getElementById("system-options");
  if (!root || !script) {
    return;
  }
  var options = JSON.parse(script.textContent);
  var board = new HeadwayCharts.Board(root, options);
  var select = root.querySelector("select[name=x_axis]");
  if (options.xAxis) {
    board.xAxis = options.xAxis;
    if (select) {
      select.value = options.xAxis;
    }
  }
  board.reload();

  var section = document.querySelector("section[data-live-url]");
  if (!section || section.dataset.terminal === "true") {
    return;
  }
  HeadwayLive.poll(function () {
    return board.poll().then(function () {
      // board.js keeps data-terminal up to date from the trial's REST detail.
      return section.dataset.terminal !== "true";
    });
  }, { intervalMs: 10000 });
})();
