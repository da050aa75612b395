// Confirmation of destructive dashboard controls, without inline handlers (the Content-Security-
// Policy allows no inline script): a form with `data-confirm` asks before it is submitted, a
// submit button with `data-confirm` asks before it submits its form.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    const button = event.target.closest("button[data-confirm], input[type=submit][data-confirm]");
    if (button && !window.confirm(button.dataset.confirm)) {
      event.preventDefault();
    }
  });
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });
})();
