// What every live page shares (experiment, trial, list, logs, charts): a JSON GET that tells an
// expired session from a lost connection, and one polling loop with back-off.
window.HeadwayLive = (function () {
  "use strict";

  // GET url as JSON with the session cookie. Rejects with error.kind "session" (401/403, or
  // redirected to the login page by login_required) or "connection" (anything else).
  function getJSON(url) {
    return fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        var loginPath = new URL(document.body.dataset.loginUrl || "/accounts/login/",
          window.location.href).pathname;
        var login = response.redirected && new URL(response.url).pathname === loginPath;
        if (response.status === 401 || response.status === 403 || login) {
          var expired = new Error("session expired");
          expired.kind = "session";
          throw expired;
        }
        if (!response.ok || response.redirected) {
          var failed = new Error(url + " answered " + response.status);
          failed.kind = "connection";
          throw failed;
        }
        return response.json();
      }, function (error) {
        error.kind = "connection";
        throw error;
      });
  }

  // Call tick() (returning a value or a Promise) every options.intervalMs (default 3000), the
  // first time after options.firstDelayMs (default: the interval). A tick resolving to false
  // stops the loop, to a number sets the next delay; a rejected tick calls options.onError and
  // doubles the delay up to options.maxBackoffMs (default 30000). Nothing runs while the tab is
  // hidden; showing it again ticks at once. Returns {stop()}.
  function poll(tick, options) {
    options = options || {};
    var interval = options.intervalMs || 3000;
    var maxBackoff = options.maxBackoffMs || 30000;
    var failures = 0;
    var timer = null;
    var running = false;
    var stopped = false;

    function schedule(delay) {
      clearTimeout(timer);
      timer = null;
      if (!stopped && !document.hidden) {
        timer = setTimeout(run, delay);
      }
    }

    function run() {
      timer = null;
      if (running || stopped) {
        return;
      }
      running = true;
      var next = interval;
      Promise.resolve().then(tick).then(function (result) {
        failures = 0;
        if (result === false) {
          stopped = true;
        } else if (typeof result === "number") {
          next = result;
        }
      }, function (error) {
        failures += 1;
        next = Math.min(interval * Math.pow(2, failures), maxBackoff);
        if (options.onError) {
          options.onError(error, failures);
        }
      }).finally(function () {
        running = false;
        schedule(next);
      });
    }

    document.addEventListener("visibilitychange", function () {
      if (document.hidden) {
        clearTimeout(timer);
        timer = null;
      } else if (!timer && !running) {
        run();
      }
    });
    schedule(options.firstDelayMs === undefined ? interval : options.firstDelayMs);
    return {
      stop: function () {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  return { getJSON: getJSON, poll: poll };
})();
