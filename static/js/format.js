// The dashboard's number format, the browser's half of dashboard/templatetags/numbers.py (sig4):
// 4 significant digits as JavaScript's Number#toString lays them out (0.0006483, 123500,
// 6.5e-8), integers below 1e15 in full, the exact value in the element's title (hover) and in
// what a copy of the page's text gets. Both halves print the same text for the same value.
window.HeadwayFormat = (function () {
  "use strict";
  var EMPTY = "\u2013"; // en dash: no value
  var MAX_EXACT_INTEGER = 1e15;
  // Plotly's d3-format spec for the same 4 significant digits (hover templates, tick labels).
  var D3 = ".4~g";

  function isNumber(x) {
    return typeof x === "number";
  }

  // x (a number, null or text) to 4 significant digits; "–" for null; text stays as is.
  function number(x) {
    if (x === null || x === undefined) {
      return EMPTY;
    }
    if (!isNumber(x)) {
      return String(x);
    }
    if (!isFinite(x)) {
      return String(x);
    }
    if (Number.isInteger(x) && Math.abs(x) < MAX_EXACT_INTEGER) {
      return String(x);
    }
    return Number(x.toPrecision(4)).toString();
  }

  // The exact value as text (shortest round-trip digits).
  function exact(x) {
    if (x === null || x === undefined) {
      return EMPTY;
    }
    return String(x);
  }

  // Show x in element el as sig4 does on the server: text, title and data-exact.
  function fill(el, x) {
    el.textContent = number(x);
    if (isNumber(x)) {
      el.classList.add("num");
      el.title = exact(x);
      el.dataset.exact = exact(x);
    } else {
      el.removeAttribute("title");
      delete el.dataset.exact;
    }
    return el;
  }

  // A new <span class="num"> showing x.
  function element(x) {
    return fill(document.createElement("span"), x);
  }

  // A copy of selected text gets the exact values of the numbers in the selection.
  document.addEventListener("copy", function (event) {
    var selection = window.getSelection();
    if (!selection || selection.rangeCount === 0 || !event.clipboardData) {
      return;
    }
    var box = document.createElement("div");
    for (var i = 0; i < selection.rangeCount; i += 1) {
      box.appendChild(selection.getRangeAt(i).cloneContents());
    }
    var numbers = box.querySelectorAll(".num[data-exact]");
    if (!numbers.length) {
      return; // nothing to change: the browser's own copy
    }
    numbers.forEach(function (el) {
      el.textContent = el.dataset.exact;
    });
    // innerText needs the box in the document (layout) to keep line breaks.
    box.style.position = "fixed";
    box.style.left = "-10000px";
    document.body.appendChild(box);
    var text = box.innerText;
    document.body.removeChild(box);
    event.clipboardData.setData("text/plain", text);
    event.preventDefault();
  });

  return { number: number, exact: exact, fill: fill, element: element, D3: D3 };
})();
