// "Copy" buttons next to CLI commands and links (any page): <button data-copy="text">.
document.addEventListener("click", function (event) {
  "use strict";
  var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
  if (button && navigator.clipboard) {
    navigator.clipboard.writeText(button.dataset.copy).then(function () {
      button.textContent = "Copied";
    });
  }
});
