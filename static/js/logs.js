// Trial logs page: while the trial runs (and no search is shown), fetch the lines printed since
// the last one shown (GET /api/v1/trials/<id>/logs/?after=<id>) every 2 s and append them,
// following the end of the log when the reader is already there. Backs off on errors; stops
// while the tab is hidden and once the trial ends.
(function () {
  "use strict";
  var TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  var root = document.getElementById("trial-logs");
  if (!root || root.dataset.tail !== "true") {
    return;
  }
  var pre = document.getElementById("log-lines");
  var status = document.getElementById("log-status");
  var lastId = Number(root.dataset.lastId);

  function atBottom() {
    var scroller = document.scrollingElement;
    return pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24 &&
      scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
  }

  function append(lines) {
    var follow = atBottom();
    lines.forEach(function (line) {
      var run = document.createElement("span");
      run.className = "run";
      run.textContent = "[run " + line.run_id + "]";
      pre.appendChild(run);
      pre.appendChild(document.createTextNode(" " + line.message + "\n"));
    });
    if (lines.length) {
      pre.hidden = false;
      var empty = document.getElementById("log-empty");
      if (empty) {
        empty.remove();
      }
      if (follow) {
        pre.scrollTop = pre.scrollHeight;
        window.scrollTo(0, document.scrollingElement.scrollHeight);
      }
    }
  }

  function tick() {
    return HeadwayLive.getJSON(root.dataset.logsUrl + "?after=" + lastId).then(function (data) {
      status.textContent = "";
      append(data.results);
      lastId = data.last_id;
      // A full page means more are waiting: fetch again at once.
      if (data.results.length >= 1000) {
        return 0;
      }
      if (TERMINAL.indexOf(data.trial_state) >= 0) {
        status.textContent = "The trial ended (" + data.trial_state + ").";
        return false;
      }
      return true;
    });
  }

  HeadwayLive.poll(tick, {
    intervalMs: 2000,
    onError: function () {
      status.textContent = "Connection lost, retrying\u2026";
    },
  });
})();
