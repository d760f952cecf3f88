// helix ui: the little behaviour htmx does not give. No inline script anywhere
// (the Content-Security-Policy forbids it), so pages declare intent in data-*
// attributes and this file acts on them.
(function () {
  "use strict";
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;

  // htmx requests carry the CSRF token as a header.
  document.addEventListener("htmx:configRequest", (event) => {
    event.detail.headers["X-CSRF-Token"] = csrf();
  });

  // A destructive form asks first: <form data-confirm="Forget ... for good?">.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    const question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // Live views: <div data-live="/runs/events" data-live-target="#run">: each
  // server-sent event's data replaces the target's HTML (the server renders it).
  function live() {
    document.querySelectorAll("[data-live]").forEach((node) => {
      if (node.dataset.liveOn) return;
      node.dataset.liveOn = "1";
      const source = new EventSource(node.getAttribute("data-live"));
      const target = document.querySelector(node.getAttribute("data-live-target")) || node;
      source.onmessage = (event) => { target.innerHTML = event.data; };
      source.addEventListener("end", () => source.close());
    });
  }
  document.addEventListener("DOMContentLoaded", live);
})();
