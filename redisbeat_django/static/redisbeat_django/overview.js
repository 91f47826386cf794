/* The deployment overview refreshes its numbers and charts: the server renders them again
   (overview/live/) every few seconds and this swaps them in. No library, works offline. */
(function () {
  "use strict";
  var box = document.getElementById("rb-overview-live");
  if (!box || !window.fetch) { return; }
  var every = Number(box.dataset.every || 5) * 1000;
  var stale = document.getElementById("rb-overview-stale");

  function failed(why) {
    if (stale) { stale.hidden = false; stale.textContent = "Not refreshed (" + why + "); trying again."; }
  }

  function refresh() {
    fetch(box.dataset.url, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (response.redirected) { throw new Error("logged out"); }
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        box.innerHTML = html;
        box.dataset.refreshed = String(Number(box.dataset.refreshed) + 1);
        if (stale) { stale.hidden = true; }
      })
      .catch(function (error) { failed(error.message); })
      .then(function () { window.setTimeout(refresh, every); });
  }

  window.setTimeout(refresh, every);
})();
