// Load the 3.5 MB mermaid bundle only on a page that draws a diagram, and only once a diagram
// comes near the viewport.
//
// The theme draws each <pre class="mermaid"> itself and fetches mermaid from a CDN when no global
// `mermaid` exists. This stand-in is that global: the theme hands it its settings and asks it to
// render each diagram; it waits until the diagram is within a screen of the viewport, loads the
// vendored bundle once, and passes the call on. Pages without a diagram never load the bundle.
(function () {
  const bundle = new URL("../vendor/mermaid/mermaid.min.js", document.currentScript.src).href;
  let settings = {};
  let real = null;

  function loadBundle() {
    real ||= new Promise((resolve, reject) => {
      const stub = window.mermaid;
      const script = document.createElement("script");
      script.src = bundle;
      script.onload = () => {
        const loaded = window.mermaid;
        window.mermaid = stub; // the theme keeps talking to the stand-in
        loaded.initialize(settings);
        resolve(loaded);
      };
      script.onerror = () => reject(new Error("could not load " + bundle));
      document.head.appendChild(script);
    });
    return real;
  }

  function nearViewport(text) {
    // The theme renders the <pre class="mermaid"> whose text it passes; wait until it is close.
    const source = [...document.querySelectorAll("pre.mermaid")].find((el) => el.textContent === text);
    if (!source || !("IntersectionObserver" in window)) return Promise.resolve();
    return new Promise((resolve) => {
      const observer = new IntersectionObserver(
        (entries) => {
          if (entries.some((entry) => entry.isIntersecting)) {
            observer.disconnect();
            resolve();
          }
        },
        { rootMargin: "100% 0px" },
      );
      observer.observe(source);
    });
  }

  window.mermaid = {
    initialize(options) {
      settings = options;
    },
    async render(id, text) {
      await nearViewport(text);
      const loaded = await loadBundle();
      return loaded.render(id, text);
    },
  };
})();
