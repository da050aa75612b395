// Trial page: draw one Plotly chart per metric from the figures embedded with json_script.
(function () {
  "use strict";
  var data = document.getElementById("trial-figures");
  if (!data || typeof Plotly === "undefined") {
    return;
  }
  var config = { responsive: true, displaylogo: false };
  JSON.parse(data.textContent).forEach(function (entry) {
    var el = document.getElementById(entry.id);
    if (el) {
      Plotly.newPlot(el, entry.figure.data, entry.figure.layout, config);
    }
  });
})();

// "Copy" buttons next to the checkpoint CLI commands.
document.addEventListener("click", function (event) {
  "use strict";
  var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
  if (button && navigator.clipboard) {
    navigator.clipboard.writeText(button.dataset.copy).then(function () {
      button.textContent = "Copied";
    });
  }
});
