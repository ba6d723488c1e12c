// watukuy admin page: refresh the parts marked data-live every few seconds, in place.
// A region the operator is using (focused, a box ticked, details open) is left alone.
(function () {
  "use strict";
  var every = parseFloat(document.body.getAttribute("data-refresh") || "0");
  if (!every || !window.fetch || !window.DOMParser) { return; }

  function busy(region) {
    var active = document.activeElement;
    if (active && active !== document.body && region.contains(active)) { return true; }
    return region.querySelector("input:checked, details[open]") !== null;
  }

  var running = false;
  function refresh() {
    if (running || document.hidden) { return; }
    running = true;
    fetch(window.location.href, { headers: { "X-Watukuy-Live": "1" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { throw new Error("status " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (region) {
          if (!region.id || busy(region)) { return; }
          var next = fresh.getElementById(region.id);
          if (next) { region.replaceWith(document.importNode(next, true)); }
        });
        document.body.removeAttribute("data-stale");
      })
      .catch(function () { document.body.setAttribute("data-stale", "1"); })
      .then(function () { running = false; });
  }

  window.setInterval(refresh, every * 1000);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
})();
