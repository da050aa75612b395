// Plotly settings every dashboard chart shares (load after plotly, before the chart scripts):
//
// - No dead buttons: Plotly's defaults lose the logo link, "Share"/"Edit in Chart Studio" (they
//   need Plotly's cloud), and box/lasso select (nothing on our pages reacts to a selection). Set
//   once with Plotly.setPlotConfig, so every chart gets them, whoever draws it.
// - Theme: layout() adds a template built from the stylesheet's colour variables (background,
//   font, grid); on `hw:theme` (static/js/theme.js) every chart on the page is relaid out with the
//   new template.
// - Keyboard: the modebar's buttons leave the tab order (tabindex=-1, again after every redraw);
//   the chart itself takes one tab stop (role=group, named after its title) and these keys:
//     R or 0  reset the axes          + / -  zoom in / out          D  download a PNG
//   (docs/dashboard.md, "Themes, keyboard and narrow screens").
window.HeadwayChartConfig = (function () {
  "use strict";

  var CONFIG = {
    displaylogo: false,
    showSendToCloud: false,
    showEditInChartStudio: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "sendDataToCloud", "editInChartStudio"],
  };
  var KEYS_HELP = "Keys: R resets the axes, plus and minus zoom, D downloads a PNG.";

  if (window.Plotly && Plotly.setPlotConfig) Plotly.setPlotConfig(CONFIG);

  function cssVar(name, fallback) {
    var value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return value || fallback;
  }

  // A Plotly layout template in the page's current colours (CSS variables of dashboard.css).
  function template() {
    var fg = cssVar("--fg", "#1f2328");
    var bg = cssVar("--bg", "#ffffff");
    var line = cssVar("--line", "#d0d7de");
    var axis = { gridcolor: line, linecolor: line, zerolinecolor: line, tickcolor: line };
    return {
      layout: {
        paper_bgcolor: bg,
        plot_bgcolor: bg,
        font: { color: fg },
        xaxis: axis,
        // Values on hover to 4 significant digits, as everywhere in the dashboard (format.js).
        yaxis: Object.assign({ hoverformat: window.HeadwayFormat ? HeadwayFormat.D3 : ".4~g" }, axis),
        legend: { bgcolor: "rgba(0,0,0,0)" },
        modebar: { bgcolor: "rgba(0,0,0,0)", color: cssVar("--muted", "#59636e"), activecolor: fg },
      },
    };
  }

  // `layout` with the theme's template (replacing any template it names; the rest is kept).
  function layout(base) {
    var out = Object.assign({}, base || {});
    out.template = template();
    return out;
  }

  // The shared config merged over a chart's own (`base` wins except for the removed buttons).
  function config(base) {
    var out = Object.assign({}, CONFIG, base || {});
    out.modeBarButtonsToRemove = CONFIG.modeBarButtonsToRemove.concat(
      (base && base.modeBarButtonsToRemove) || []);
    return out;
  }

  function chartName(gd) {
    var title = gd.layout && gd.layout.title;
    var text = (title && (title.text || (typeof title === "string" ? title : ""))) || "";
    var probe = document.createElement("div");
    probe.innerHTML = String(text);  // titles are HTML-escaped for Plotly: decode, drop tags
    return (probe.textContent || "").trim();
  }

  function untab(gd) {
    var buttons = gd.querySelectorAll(".modebar-btn");
    for (var i = 0; i < buttons.length; i++) buttons[i].setAttribute("tabindex", "-1");
  }

  function clickButton(gd, selector) {
    var button = gd.querySelector(".modebar-btn" + selector);
    if (!button) return false;
    button.click();
    return true;
  }

  function onKey(event) {
    var gd = event.currentTarget;
    if (event.target !== gd || event.altKey || event.ctrlKey || event.metaKey) return;
    var key = event.key;
    var done = false;
    if (key === "r" || key === "R" || key === "0") {
      done = clickButton(gd, '[data-attr="zoom"][data-val="reset"]') ||
        clickButton(gd, '[data-attr="zoom"][data-val="auto"]');
      if (!done && gd._fullLayout && gd._fullLayout.xaxis) {
        Plotly.relayout(gd, { "xaxis.autorange": true, "yaxis.autorange": true });
        done = true;
      }
    } else if (key === "+" || key === "=") {
      done = clickButton(gd, '[data-attr="zoom"][data-val="in"]');
    } else if (key === "-") {
      done = clickButton(gd, '[data-attr="zoom"][data-val="out"]');
    } else if (key === "d" || key === "D") {
      var name = (chartName(gd) || "chart").replace(/[^A-Za-z0-9_.-]+/g, "_");
      Plotly.downloadImage(gd, { format: "png", filename: name });
      done = true;
    }
    if (done) event.preventDefault();
  }

  // After each draw of `gd`: modebar out of the tab order, the chart one named, keyed tab stop.
  function afterDraw(gd) {
    untab(gd);
    gd.setAttribute("tabindex", "0");
    gd.setAttribute("role", "group");
    // A name its page gave the chart (aria-label before the first draw) wins over the title.
    if (gd.dataset.hwName === undefined) gd.dataset.hwName = gd.getAttribute("aria-label") || "";
    var title = chartName(gd);
    var name = gd.dataset.hwName || (title ? title + " chart" : "Chart");
    gd.setAttribute("aria-label", name + ". " + KEYS_HELP);
    gd.setAttribute("aria-keyshortcuts", "R 0 + - D");
    if (!gd.dataset.hwKeys) {
      gd.dataset.hwKeys = "1";
      gd.addEventListener("keydown", onKey);
      // Plotly rebuilds the modebar when its buttons change (e.g. after a relayout).
      if (gd.on) gd.on("plotly_afterplot", function () { untab(gd); });
    }
    return gd;
  }

  // Plotly.newPlot / Plotly.react with the theme, the shared config and afterDraw (role=group,
  // so the modebar's buttons inside are allowed: role=img may not hold focusable content).
  function draw(method, gd, data, base, baseConfig) {
    // A responsive chart redrawn by Plotly.react can come back with its paper sized 100% of a
    // div that has no height of its own (0 px: the page below slides under the chart). A fixed
    // layout height is kept as the div's minimum, which also reserves the space before drawing.
    if (base && typeof base.height === "number") {
      gd.style.minHeight = base.height + "px";
    }
    return Promise.resolve(Plotly[method](gd, data, layout(base), config(baseConfig)))
      .then(function () { return afterDraw(gd); });
  }

  document.addEventListener("hw:theme", function () {
    var plots = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < plots.length; i++) {
      if (plots[i]._fullLayout) Plotly.relayout(plots[i], { template: template() });
    }
  });

  return {
    config: config,
    layout: layout,
    template: template,
    afterDraw: afterDraw,
    react: function (gd, data, base, baseConfig) { return draw("react", gd, data, base, baseConfig); },
    newPlot: function (gd, data, base, baseConfig) {
      return draw("newPlot", gd, data, base, baseConfig);
    },
  };
})();
