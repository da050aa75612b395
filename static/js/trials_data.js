// Every trial of the experiment page as its scripts need it (dashboard.overview.trials_data):
// fetched once, as the first deferred script runs, so the request leaves before Plotly is even
// parsed. The page itself carries only one page of table rows (dashboard/trials_table.py).
// HeadwayTrialsData.promise resolves to {metric, smaller_is_better, best, columns, hparams,
// trials: [{id, value, hparams: {name: number or text}}]}; the legend (trials_legend.js), the
// charts (experiment.js) and the hyperparameter views (hparams.js) all read it.
window.HeadwayTrialsData = (function () {
  "use strict";
  var root = document.getElementById("experiment");
  var url = root && root.dataset.trialsDataUrl;
  var api = { promise: url ? HeadwayLive.getJSON(url) : Promise.resolve(null), count: null };
  // A failed fetch is reported by experiment.js's banner; the scripts draw nothing from it.
  api.promise.then(function (data) { api.count = data ? data.trials.length : 0; }, function () {});

  // Fetch again (the live poll saw new trials or a new best): emits hw:trials-data {data}.
  api.refresh = function () {
    if (!url) {
      return api.promise;
    }
    api.promise = HeadwayLive.getJSON(url);
    api.promise.then(function (data) {
      api.count = data.trials.length;
      document.dispatchEvent(new CustomEvent("hw:trials-data", { detail: { data: data } }));
    }, function () {});
    return api.promise;
  };
  return api;
})();
