// Colour theme: light, dark, or "system" (follows prefers-color-scheme), remembered in
// localStorage. Loaded in <head> WITHOUT defer so data-theme is set on <html> before the first
// paint (no flash of the wrong theme); the stylesheet's [data-theme="dark"] block redefines the
// colour variables. The top bar's <select id="theme-select"> changes the choice.
//
// Every change of the resolved theme (toggle, or the OS switching while on "system") dispatches
// `hw:theme` on document, detail {theme: "light" | "dark", choice: "light" | "dark" | "system"};
// charts (static/js/chart_config.js) redraw with the new colours.
window.HeadwayTheme = (function () {
  "use strict";

  var KEY = "headway-theme";
  var CHOICES = ["system", "light", "dark"];
  var media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  // localStorage throws where storage is disabled: the choice then lasts for the page only.
  function stored() {
    try {
      var value = window.localStorage.getItem(KEY);
      return CHOICES.indexOf(value) >= 0 ? value : "system";
    } catch (err) {
      return "system";
    }
  }

  function resolve(choice) {
    if (choice === "light" || choice === "dark") return choice;
    return media && media.matches ? "dark" : "light";
  }

  var choice = stored();

  function apply(announce) {
    var root = document.documentElement;
    var theme = resolve(choice);
    var changed = root.getAttribute("data-theme") !== theme;
    root.setAttribute("data-theme", theme);
    root.setAttribute("data-theme-choice", choice);
    if (announce && changed) {
      document.dispatchEvent(new CustomEvent("hw:theme", { detail: { theme: theme, choice: choice } }));
    }
  }

  // Set the choice ("system" | "light" | "dark"), remember it, and apply it.
  function set(value) {
    if (CHOICES.indexOf(value) < 0) throw new Error("unknown theme: " + value);
    choice = value;
    try {
      window.localStorage.setItem(KEY, value);
    } catch (err) {
      // storage disabled: the choice still applies to this page
    }
    apply(true);
  }

  apply(false);
  if (media) {
    var follow = function () { if (choice === "system") apply(true); };
    if (media.addEventListener) media.addEventListener("change", follow);
    else if (media.addListener) media.addListener(follow);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var select = document.getElementById("theme-select");
    if (!select) return;
    select.value = choice;
    select.addEventListener("change", function () { set(select.value); });
  });

  return {
    set: set,
    choice: function () { return choice; },
    // The theme in effect: "light" or "dark".
    current: function () { return resolve(choice); },
  };
})();
