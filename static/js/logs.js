// Trial logs page (templates/dashboard/trial_logs.html).
//
// - Every line gets a level and a rank, parsed here from its text (the registry stores lines as
//   printed): the rank from the launcher's "[rank=N] || " prefix; the level from a Python
//   logging / Determined-style word near the start ("INFO:", "WARNING:root:", "2024-.. ERROR ..",
//   "[ERROR]"), a traceback ("Traceback (most recent call last):", its indented frames, the
//   closing "SomeError: ..."), or a Python warning ("UserWarning: ..."); anything else is info.
// - Level check boxes and a rank select hide the other lines; error and critical lines are
//   highlighted; "Jump to the first error" scrolls to the first shown one.
// - While the trial runs (and no search is shown), fetch the lines printed since the last one
//   shown (GET /api/v1/trials/<id>/logs/?after=<id>) every 2 s and append them, following the end
//   of the log when the reader is already there. Backs off on errors; stops while the tab is
//   hidden and once the trial ends.
(function () {
  "use strict";
  var TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  var LEVELS = {
    TRACE: "debug", DEBUG: "debug", INFO: "info", WARN: "warning", WARNING: "warning",
    ERROR: "error", CRITICAL: "critical", FATAL: "critical",
  };
  var RANK_PREFIX = /^\[rank=(\d+)\] \|\| ?/;
  // An upper-case level word within the first 80 characters, between separators.
  var LEVEL_WORD = /(?:^|[\s[\]|:(-])(TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?=[\s\]|:)-]|$)/;
  var EXCEPTION_LINE = /^(?:[A-Za-z_][\w.]*\.)?\w*(?:Error|Exception|Interrupt|Exit)\b(?::|$)/;
  var PY_WARNING = /\b\w*Warning: /;

  var root = document.getElementById("trial-logs");
  if (!root) {
    return;
  }
  var pre = document.getElementById("log-lines");
  var status = document.getElementById("log-status");
  var tools = document.getElementById("log-tools");
  var rankSelect = document.getElementById("log-rank");
  var rankLabel = document.getElementById("log-rank-label");
  var firstError = document.getElementById("log-first-error");
  var counts = document.getElementById("log-counts");
  var previous = {}; // rank ("" without one) -> level of its last line (traceback frames)
  var ranks = {};

  // The level of one message (its rank prefix removed); `before`: the level of the same rank's
  // previous line.
  function levelOf(message, before) {
    var word = LEVEL_WORD.exec(message.slice(0, 80));
    if (/^Traceback \(most recent call last\)/.test(message)) {
      return "error";
    }
    if ((before === "error" || before === "critical") && /^\s/.test(message)) {
      return before; // a traceback's frames and indented continuation lines
    }
    if (word) {
      return LEVELS[word[1]];
    }
    if (EXCEPTION_LINE.test(message)) {
      return "error";
    }
    return PY_WARNING.test(message) ? "warning" : "info";
  }

  function messageOf(line) {
    var text = line.lastChild ? line.lastChild.textContent : "";
    return text.replace(/^ /, "").replace(/\n$/, "");
  }

  function annotate(line) {
    var message = messageOf(line);
    var match = RANK_PREFIX.exec(message);
    var rank = match ? match[1] : "";
    var level = levelOf(match ? message.slice(match[0].length) : message, previous[rank]);
    var found = { level: level, rank: rank };
    previous[rank] = level;
    line.dataset.level = level;
    line.dataset.rank = rank;
    if (level === "error" || level === "critical") {
      line.classList.add("log-error");
    }
    if (found.rank !== "" && !ranks[found.rank]) {
      ranks[found.rank] = true;
      var option = document.createElement("option");
      option.value = found.rank;
      option.textContent = "rank " + found.rank;
      var options = Array.prototype.slice.call(rankSelect.options, 1);
      var after = options.filter(function (o) { return Number(o.value) > Number(found.rank); })[0];
      rankSelect.insertBefore(option, after || null);
      rankLabel.hidden = false;
    }
  }

  function shownLevels() {
    var out = {};
    tools.querySelectorAll("input[name=level]").forEach(function (box) {
      out[box.value] = box.checked;
    });
    return out;
  }

  function applyFilters() {
    var levels = shownLevels();
    var rank = rankSelect.value;
    var lines = pre.querySelectorAll(".log-line");
    var shown = 0;
    var errors = 0;
    lines.forEach(function (line) {
      var visible = levels[line.dataset.level] !== false && (rank === "" || line.dataset.rank === rank);
      line.hidden = !visible;
      if (visible) {
        shown += 1;
        if (line.classList.contains("log-error")) {
          errors += 1;
        }
      }
    });
    firstError.disabled = errors === 0;
    counts.textContent = shown + " of " + lines.length + " lines shown, " + errors + " error" +
      (errors === 1 ? "" : "s");
  }

  function jumpToFirstError() {
    var line = pre.querySelector(".log-error:not([hidden])");
    if (!line) {
      return;
    }
    var current = pre.querySelector(".log-current");
    if (current) {
      current.classList.remove("log-current");
    }
    line.classList.add("log-current");
    line.tabIndex = -1;
    line.scrollIntoView({ block: "center" });
    line.focus({ preventScroll: true });
  }

  pre.querySelectorAll(".log-line").forEach(annotate);
  tools.hidden = false;
  tools.addEventListener("change", applyFilters);
  firstError.addEventListener("click", jumpToFirstError);
  applyFilters();

  if (root.dataset.tail !== "true") {
    return;
  }
  var lastId = Number(root.dataset.lastId);

  function atBottom() {
    var scroller = document.scrollingElement;
    return pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24 &&
      scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
  }

  function append(lines) {
    var follow = atBottom();
    lines.forEach(function (data) {
      var line = document.createElement("span");
      line.className = "log-line";
      var run = document.createElement("span");
      run.className = "run";
      run.textContent = "[run " + data.run_id + "]";
      line.appendChild(run);
      line.appendChild(document.createTextNode(" " + data.message + "\n"));
      pre.appendChild(line);
      annotate(line);
    });
    if (lines.length) {
      applyFilters();
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
