/* The cache at any length (llm_attention_site.cache_explorer): a row per model, its cache
   for a batch of sequences of the length chosen, split by kind of part. Every model's terms
   come from Python, in the figure's data-cache; this script only sums them, as
   cache_explorer.cache_bytes does, and writes the bytes as cache_explorer.human does.

   attention-explorer.js loads this script when a page has such a figure, and calls
   window.cacheExplorer.setup(figure, ui) with its own helpers. figure.cacheAt(length, batch)
   gives every model's bytes by kind, as the rows show them: the site's tests compare it with
   Python's, and a reader may call it in the browser's console. */
(function () {
  "use strict";

  // One term's bytes for one sequence of length tokens (Term.bytes_at).
  function termBytes(t, length) {
    var held = t.span === null ? length : Math.min(length, t.span);
    return t.per * Math.floor(held / t.every) + t.open * (length % t.every) +
      (length >= t.every ? t.closed : 0) + t.fixed;
  }

  // A model's bytes for batch sequences of length tokens, by kind (cache_bytes).
  function bytes(model, length, batch) {
    var found = {};
    model.terms.forEach(function (t) {
      found[t.kind] = (found[t.kind] || 0) + termBytes(t, length) * batch;
    });
    return found;
  }

  // Bytes in the largest unit that leaves at least 1: 2 decimals under 10, 1 under 100,
  // none from there, half up on whole hundredths (human).
  function human(n, units) {
    var unit = units[0];
    units.forEach(function (u) { if (n >= u[1]) unit = u; });
    var value = n / unit[1];
    var decimals = value < 10 ? 2 : value < 100 ? 1 : 0;
    var scale = Math.pow(10, decimals);
    var scaled = Math.floor(value * scale + 0.5);
    var whole = Math.floor(scaled / scale), part = String(scaled % scale);
    while (part.length < decimals) part = "0" + part;
    return (decimals ? whole + "." + part : String(whole)) + " " + unit[0];
  }

  function total(found) {
    return Object.keys(found).reduce(function (sum, k) { return sum + found[k]; }, 0);
  }

  function setup(figure, ui) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var data = JSON.parse(figure.dataset.cache);
    var el = ui.el;
    var names = {};
    data.kinds.forEach(function (k) { names[k[0]] = k[1]; });
    var order = data.kinds.map(function (k) { return k[0]; });
    var state = {length: data.start[0], batch: data.start[1], every: false};
    var rows = {};
    figure.querySelectorAll(".cache-row").forEach(function (row) { rows[row.dataset.model] = row; });
    var setting = figure.querySelector(".cache-setting");  // the sliders' labels speak

    figure.cacheAt = function (length, batch) {
      var out = {};
      data.models.forEach(function (m) { out[m.name] = bytes(m, length, batch); });
      return out;
    };

    function render() {
      var length = data.lengths[state.length], batch = data.batches[state.batch];
      setting.textContent = length.toLocaleString("en-US") + " tokens (" + data.labels[state.length] +
        "), batch of " + batch;
      var shown = data.models.filter(function (m) { return state.every || m.default; });
      var found = {}, largest = 0;
      shown.forEach(function (m) {
        found[m.name] = bytes(m, length, batch);
        largest = Math.max(largest, total(found[m.name]));
      });
      data.models.forEach(function (m) { rows[m.name].hidden = !found[m.name]; });
      shown.forEach(function (m) {
        var row = rows[m.name], parts = found[m.name];
        var kinds = order.filter(function (k) { return parts[k]; });
        row.querySelector(".cache-total").textContent = human(total(parts), data.units);
        var bar = row.querySelector(".cache-bar"), list = row.querySelector(".cache-parts");
        bar.textContent = "";
        list.textContent = "";
        kinds.forEach(function (k) {
          var piece = el("span", "cache-k-" + k);
          piece.style.width = (100 * parts[k] / largest).toFixed(3) + "%";
          bar.appendChild(piece);
          var part = el("span", "cache-part cache-k-" + k, names[k] + " " + human(parts[k], data.units));
          part.dataset.kind = k;
          list.appendChild(part);
        });
        row.querySelector(".cache-note").textContent = length > m.context
          ? "past the " + m.context.toLocaleString("en-US") + " positions its config names" : "";
      });
    }

    // The controls: which models, the tokens held, the batch.
    var controls = el("div", "cache-controls");
    var count = data.models.filter(function (m) { return m.default; }).length;
    var which = ui.switchBar(["These " + count, "All " + data.models.length], function (k) {
      state.every = k === 1;
      render();
    }, null, "Models:");
    which.press(0);
    controls.appendChild(which.bar);
    [["Tokens held", data.labels, "length", ["Shorter", "Longer"], function (k) {
      return data.lengths[k].toLocaleString("en-US") + " tokens";
    }], ["Batch", data.batches, "batch", ["Fewer", "More"], function (k) {
      return "batch of " + data.batches[k];
    }]].forEach(function (c) {
      var box = el("div", "cache-control cache-" + c[2]);
      ui.stepControls(box, c[1].length, c[4], function (k) { state[c[2]] = k; render(); },
                      state[c[2]], true, c[3], c[1]);
      box.querySelector(".explorer-steps input").setAttribute("aria-label", c[0]);
      box.prepend(el("span", "cache-control-name", c[0]));
      controls.appendChild(box);
    });
    figure.prepend(controls);
    render();
  }

  window.cacheExplorer = {bytes: bytes, human: human, setup: setup};
})();
