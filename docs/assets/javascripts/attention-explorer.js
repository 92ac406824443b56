/* The site's explorable figures (llm_attention_site.explorer and .stepper). Every number was
   computed in Python at build and sits in the figure's HTML or its data attribute; this script
   only chooses what to show:
   - .attention-explorer: a switch per state, and the weights of the query row under the
     pointer, tapped, or chosen with the arrow keys once the grid has the focus;
   - .heads-explorer: a small map per layer x head; choosing one opens it in the row explorer;
   - .stepper: one stage of attention at a time (Previous, Next, a slider), one query row
     highlighted in all of them;
   - .decode-explorer: decoding one token at a time, the cache filling row by row;
   - .temperature-explorer: the next token's probabilities at a temperature and a top-k;
   - .live-explorer: a button that loads the trained tiny GPT and its explorer
     (tiny-gpt.js, live-explorer.js, the weights), only when the reader asks for them;
   - .cache-explorer: every model's cache at a length and a batch (cache-explorer.js, loaded
     by the pages that have one).
   Without the script each figure stays a still table. */
(function () {
  "use strict";

  var SCRIPTS = document.currentScript ? document.currentScript.src : location.href;

  function fmt(n) { return (n / 100).toFixed(2); }

  function el(tag, className, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function button(text, onClick) {
    var b = el("button", "explorer-button", text);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  // A cell's colour is its weight, as the opacity of the site's blue (the stylesheet reads
  // --w); the inks' thresholds on the light and the dark page come from Python
  // (explorer.LIGHT_INK_FROM and DARK_INK_FROM, the figure's data-*-ink-from).
  function paint(cell, n, inks) {
    if (n) cell.style.setProperty("--w", fmt(n)); else cell.style.removeProperty("--w");
    cell.classList.toggle("ink-light", n / 100 >= inks.light);
    cell.classList.toggle("ink-dark-on-slate", n / 100 >= inks.dark);
  }

  function inksOf(figure) {
    return {light: parseFloat(figure.dataset.lightInkFrom), dark: parseFloat(figure.dataset.darkInkFrom)};
  }

  // Rows chosen by pointing, tapping or the arrow keys: the grid takes the focus as one
  // control, so that a reader tabs past it at once instead of through every row.
  function rowChooser(table, count, label, choose, current) {
    table.tabIndex = 0;
    table.setAttribute("aria-label", label + ": the arrow keys choose the query row");
    var pick = function (event) {
      var row = event.target.closest && event.target.closest("tbody tr");
      if (row && table.contains(row)) choose(row.sectionRowIndex);
    };
    // Where the pointer was when a key last chose a row. When the grid redraws under a
    // pointer at rest, the browser sends pointerover again from the same place: that is
    // not the reader pointing, and must not undo the key.
    var pointer = null, restingAt = null;
    var where = function (event) { return event.clientX + "," + event.clientY; };
    table.addEventListener("pointermove", function (event) { pointer = where(event); });
    table.addEventListener("pointerover", function (event) {
      if (where(event) === restingAt) return;
      pointer = where(event);
      restingAt = null;
      pick(event);
    });
    table.addEventListener("click", pick);
    table.addEventListener("keydown", function (event) {
      var now = current(), next = {
        ArrowDown: now + 1, ArrowRight: now + 1, ArrowUp: now - 1, ArrowLeft: now - 1,
        Home: 0, End: count - 1
      }[event.key];
      if (next === undefined) return;
      event.preventDefault();
      restingAt = pointer;
      choose(Math.max(0, Math.min(count - 1, next)));
    });
  }

  // Previous, a slider and Next over count steps; onChange(k) shows step k. scale: the
  // value of each step, written under the slider's stops.
  function stepControls(figure, count, describe, onChange, start, quiet, names, scale) {
    names = names || ["Previous", "Next"];
    var bar = el("div", "explorer-steps");
    var slider = el("input");
    slider.type = "range";
    slider.min = "0";
    slider.max = String(count - 1);
    slider.step = "1";
    // Where the figure writes the step in its own words (quiet), the label is for screen
    // readers only.
    var label = el("p", quiet ? "explorer-step-label explorer-hidden" : "explorer-step-label");
    label.setAttribute("aria-live", "polite");
    var set = function (k) {
      k = Math.max(0, Math.min(count - 1, k));
      slider.value = String(k);
      slider.setAttribute("aria-valuetext", describe(k));
      label.textContent = describe(k);
      var focused = document.activeElement;
      previous.disabled = k === 0;
      next.disabled = k === count - 1;
      // A disabled button loses the focus to the page: hand it to the other one, so that a
      // keyboard reader who pressed Next up to the end stays in the figure.
      if (focused === next && next.disabled) (previous.disabled ? slider : previous).focus();
      if (focused === previous && previous.disabled) (next.disabled ? slider : next).focus();
      onChange(k);
    };
    var previous = button(names[0], function () { set(parseInt(slider.value, 10) - 1); });
    var next = button(names[1], function () { set(parseInt(slider.value, 10) + 1); });
    previous.classList.add("explorer-previous");
    next.classList.add("explorer-next");
    slider.setAttribute("aria-label", "step");
    slider.addEventListener("input", function () { set(parseInt(slider.value, 10)); });
    var track = slider;
    if (scale) {  // the slider and its scale, one under the other (the slider says its value)
      track = el("div", "explorer-track");
      var ticks = el("div", "explorer-scale");
      ticks.setAttribute("aria-hidden", "true");
      scale.forEach(function (value, k) {
        var tick = el("span", null, String(value));
        tick.style.setProperty("--at", String(k / (count - 1)));
        ticks.appendChild(tick);
      });
      track.append(slider, ticks);
    }
    bar.append(previous, track, next);
    figure.prepend(label);
    figure.prepend(bar);
    set(start || 0);
    return set;
  }

  // A row of buttons, one pressed; label: what they choose, written before them.
  function switchBar(names, onPick, className, label) {
    var bar = el("div", "explorer-switches" + (className ? " " + className : ""));
    bar.setAttribute("role", "group");
    if (label) {
      var name = el("span", "explorer-switches-label", label);
      name.id = "switches-" + (++switchBars);
      bar.setAttribute("aria-labelledby", name.id);
      bar.appendChild(name);
    }
    var buttons = names.map(function (name, k) {
      var b = button(name, function () { onPick(k); press(k); });
      b.dataset.state = name;
      bar.appendChild(b);
      return b;
    });
    var press = function (k) {
      buttons.forEach(function (b, i) { b.setAttribute("aria-pressed", String(i === k)); });
    };
    return {bar: bar, buttons: buttons, press: press};
  }

  var switchBars = 0;

  // The chosen row's weights, one chip per key: what the grid's cells say, with digits. A
  // key named by its token and its position (keyName) says how, once, under the chips.
  function chips(readout, title, labels, values, inks, named) {
    readout.textContent = "";
    readout.appendChild(el("p", "explorer-readout-title", title));
    var list = el("div", "explorer-chips");
    labels.forEach(function (label, j) {
      var chip = el("span", "explorer-chip");
      paint(chip, values[j], inks);
      chip.append(el("span", "explorer-key", label), el("span", "explorer-value", fmt(values[j])));
      list.appendChild(chip);
    });
    readout.appendChild(list);
    if (named) readout.appendChild(el("p", "explorer-key-legend", "Each key: its token @ its position."));
  }

  // A key as its token at its position, "25@11": a dot between two numbers ("11·25") read
  // as a decimal or a product.
  function keyName(token, position) { return token + "@" + position; }

  function quoted(token) { return "\u201c" + token + "\u201d"; }

  // A name inside parentheses: a thin space between a superscript and a closing parenthesis
  // ("softmax(X X\u1d40)"), whose glyphs otherwise touch.
  function inParentheses(name) {
    return ("(" + name + ")").replace(/([\u00b2\u00b3\u00b9\u1d2c-\u1d6a\u2070-\u209c])(?=\))/g, "$1\u2009");
  }

  function setupRows(figure) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var data = JSON.parse(figure.dataset.explorer);
    var inks = inksOf(figure);
    var compact = figure.classList.contains("explorer-compact");
    var names = Object.keys(data.states);
    var state = names[0];
    var query = 0;
    var table = figure.querySelector("table");
    var rows = table.tBodies[0].rows;
    var labels = data.tokens.map(function (t, j) { return compact ? keyName(t, j) : t; });

    var readout = el("div", "explorer-readout");
    readout.setAttribute("aria-live", "polite");
    figure.querySelector(".explorer-grid").insertAdjacentElement("afterend", readout);

    var switches = null;
    if (names.length > 1 && figure.dataset.switches !== "none") {
      switches = switchBar(names, function (k) { state = names[k]; render(); });
      figure.prepend(switches.bar);
    }
    rowChooser(table, rows.length, "Attention weights", function (i) {
      if (i !== query) { query = i; render(); }
    }, function () { return query; });

    function render() {
      var weights = data.states[state];
      Array.prototype.forEach.call(rows, function (row, i) {
        row.classList.toggle("explorer-selected", i === query);
        for (var j = 0; j < data.tokens.length; j++) {
          var cell = row.cells[j + 1];
          if (!compact) cell.firstChild.textContent = fmt(weights[i][j]);
          paint(cell, weights[i][j], inks);
        }
      });
      if (switches) switches.press(names.indexOf(state));
      var where = compact ? " at position " + query : "";
      chips(readout, "Query " + quoted(data.tokens[query]) + where + " attends to " + inParentheses(state) + ":",
            labels, weights[query], inks, compact);
    }
    figure.explorerShow = function (name) { state = name; render(); };
    render();
  }

  function setupHeads(figure) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var rows = figure.querySelector(".attention-explorer");
    setupRows(rows);
    var phases = Array.prototype.slice.call(figure.querySelectorAll(".heads-phase"));
    figure.querySelectorAll(".heads-title").forEach(function (t) { t.hidden = true; });  // the switch says it
    var names = phases.map(function (p) { return p.dataset.phase; });
    var phase = 0;
    var open = [figure.dataset.openLayer, figure.dataset.openHead];
    var tiles = figure.querySelectorAll(".head-tile");
    function show() {
      phases.forEach(function (p, k) { p.hidden = k !== phase; });
      tiles.forEach(function (tile) {
        var chosen = tile.dataset.layer === open[0] && tile.dataset.head === open[1];
        tile.setAttribute("aria-pressed", String(chosen));
        if (chosen && tile.closest(".heads-phase") === phases[phase]) {
          rows.explorerShow(tile.dataset.state);
          rows.querySelector("figcaption").textContent = tile.dataset.state;
        }
      });
    }
    var switches = switchBar(names, function (k) { phase = k; show(); });
    figure.prepend(switches.bar);
    switches.press(0);
    tiles.forEach(function (tile) {
      tile.addEventListener("click", function () {
        open = [tile.dataset.layer, tile.dataset.head];
        show();
      });
    });
    show();
  }

  function setupStepper(figure) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var stages = Array.prototype.slice.call(figure.querySelectorAll(".stepper-stage"));
    // The stages share one place, as tall as the tallest (explorer.css): stepping never
    // moves the text below the figure.
    var stack = el("div", "stepper-stages");
    stages[0].insertAdjacentElement("beforebegin", stack);
    stages.forEach(function (stage) { stack.appendChild(stage); });
    var query = parseInt(figure.dataset.query, 10);
    var count = stages[0].querySelector("tbody").rows.length;
    function highlight() {
      stages.forEach(function (stage) {
        Array.prototype.forEach.call(stage.querySelector("tbody").rows, function (row, i) {
          row.classList.toggle("explorer-selected", i === query);
        });
      });
    }
    stages.forEach(function (stage) {
      rowChooser(stage.querySelector("table"), count, stage.dataset.title, function (i) {
        query = i;
        highlight();
      }, function () { return query; });
    });
    stepControls(figure, stages.length, function (k) {
      return "Stage " + (k + 1) + " of " + stages.length + ": " + stages[k].dataset.title;
    }, function (k) {
      stages.forEach(function (stage, i) { stage.hidden = i !== k; });
    }, 0, true);
    highlight();
  }

  // Keep box as tall as the tallest of its count views (show(k) draws view k, redraw() puts
  // the current one back), so that the text below the figure never moves; measured again
  // whenever the width of watched (an element the box does not resize) changes.
  function steadyHeight(box, watched, count, show, redraw) {
    if (typeof ResizeObserver === "undefined") return;
    var width = -1;
    new ResizeObserver(function () {
      if (watched.clientWidth === width) return;
      width = watched.clientWidth;
      box.style.minHeight = "";
      var tallest = 0;
      for (var k = 0; k < count; k++) {
        show(k);
        tallest = Math.max(tallest, box.getBoundingClientRect().height);
      }
      box.style.minHeight = tallest + "px";
      redraw();
    }).observe(watched);
  }

  var CACHE_MARKS = {held: "\u2022", added: "+", dropped: "\u00d7", empty: ""};

  function setupDecode(figure) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var data = JSON.parse(figure.dataset.decode);
    var inks = inksOf(figure);
    var compact = figure.classList.contains("explorer-compact");
    var table = figure.querySelector("table");
    var rows = table.tBodies[0].rows;
    var cache = table.tFoot.rows[0].cells;
    var status = figure.querySelector(".decode-status");
    // Under the grid (nothing above it moves), the step's words and the chosen row's weights.
    var below = el("div", "decode-below");
    status.insertAdjacentElement("beforebegin", below);
    var readout = el("div", "explorer-readout");
    readout.setAttribute("aria-live", "polite");
    below.append(status, readout);
    var steps = data.steps;
    var n = steps.length;
    var T = data.tokens.length;

    // Step k, with the query row shown: the step's newest query, or at the first step (the
    // prompt, computed all at once) any row of the prompt.
    function render(k, query) {
      var last = steps[k][0], readsFrom = steps[k][1], holdsFrom = steps[k][2], bytes = steps[k][3];
      if (query === undefined || k > 0 || query > last) query = last;
      for (var i = 0; i < T; i++) {
        rows[i].classList.toggle("explorer-selected", i === query);
        rows[i].classList.toggle("decode-future", i > last);
        for (var j = 0; j < T; j++) {
          var cell = rows[i].cells[j + 1];
          if (i <= last) {
            if (!compact) cell.innerHTML = "<span>" + fmt(data.weights[i][j]) + "</span>";
            paint(cell, data.weights[i][j], inks);
          } else {
            cell.textContent = "";
            cell.style.removeProperty("--w");
            cell.classList.remove("ink-light", "ink-dark-on-slate");
          }
        }
      }
      for (var c = 0; c < T; c++) {
        var kind = c < holdsFrom ? "dropped" : c === last ? "added" : c <= last ? "held" : "empty";
        if (k === 0 && c <= last && c >= holdsFrom) kind = "added";  // the prefill adds them all
        cache[c + 1].className = "cache-" + kind;
        cache[c + 1].textContent = CACHE_MARKS[kind];
      }
      var held = last + 1 - holdsFrom;
      var holds = "; the cache holds " + held + (held === 1 ? " row, " : " rows, ") +
        bytes.toLocaleString("en-US") + " bytes.";
      var from = readsFrom;
      if (query === last) {
        status.textContent = "Step " + (k + 1) + " of " + n +
          (k === 0 && last > 0 ? " (the prompt, all at once)" : "") + ": the query at position " +
          last + " (" + quoted(data.tokens[last]) + ") reads keys " + readsFrom + " to " + last + holds;
      } else {  // a row of the prompt: its weights over every key up to it
        from = 0;
        status.textContent = "Step 1 of " + n + " (the prompt, all at once): the prompt's query at " +
          "position " + query + " (" + quoted(data.tokens[query]) + "), computed with the others" + holds;
      }
      var labels = [], values = [];
      for (var key = from; key <= query; key++) {
        labels.push(keyName(data.tokens[key], key));
        values.push(data.weights[query][key]);
      }
      chips(readout, "Query " + quoted(data.tokens[query]) + " at position " + query + " reads:",
            labels, values, inks, true);
    }
    var current = 0, query;
    var set = stepControls(figure, n, function (k) { return "Step " + (k + 1) + " of " + n; },
                           function (k) { current = k; query = undefined; render(k); }, 0, true);
    // Pointing at a row (or the arrow keys on the grid) goes to the step that computed it; a row
    // of the prompt shows at the first step.
    rowChooser(table, T, "Decoding", function (i) {
      var k = 0;
      while (k < n - 1 && steps[k][0] < i) k++;
      if (k !== current) set(k);
      if (k === 0 && i !== query) { query = i; render(0, i); }
    }, function () { return query === undefined ? steps[current][0] : query; });
    var prompt = steps[0][0];  // the prompt's rows before its last: views of their own
    steadyHeight(below, figure.querySelector(".explorer-grid"), n + prompt, function (v) {
      if (v < n) render(v); else render(0, v - n);
    }, function () { render(current, query); });
  }

  function setupTemperature(figure) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var data = JSON.parse(figure.dataset.temperature);
    var t = data.start[0], keep = data.start[1];
    var rows = figure.querySelector("tbody").rows;
    var setting = figure.querySelector(".temperature-setting");
    function render() {
      var probs = data.probs[t * data.keeps.length + keep];
      setting.textContent = "temperature " + data.temperatures[t] + ", keep " + data.keeps[keep];
      Array.prototype.forEach.call(rows, function (row, i) {
        row.cells[1].firstChild.style.width = probs[i] + "%";
        row.cells[2].textContent = fmt(probs[i]);
      });
    }
    var keeps = switchBar(data.keeps, function (k) { keep = k; render(); }, null, "Keep:");
    keeps.press(keep);
    figure.prepend(keeps.bar);
    var set = stepControls(figure, data.temperatures.length, function (k) {
      return "temperature " + data.temperatures[k];
    }, function (k) { t = k; render(); }, t, true, ["Colder", "Warmer"], data.temperatures);
    figure.querySelector(".explorer-steps input").setAttribute("aria-label", "temperature");
    set(t);
  }

  // The live explorer's script, styles and model load when the reader asks for them.
  function load(name) {
    return new Promise(function (resolve, reject) {
      var css = /css$/.test(name), e = document.createElement(css ? "link" : "script");
      if (css) e.rel = "stylesheet";
      e[css ? "href" : "src"] = new URL(name, SCRIPTS).href;
      e.onload = resolve;
      e.onerror = function () { reject(new Error(name + " did not load")); };
      document.head.appendChild(e);
    });
  }

  function setupLive(figure) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var data = JSON.parse(figure.dataset.live);
    var size = " (" + Math.round(data.bytes / 1000) + " KB)";
    var open = button("Run the model in this page" + size, function () {
      open.disabled = true;
      open.textContent = "Loading the model" + size;
      (window.liveExplorer ? Promise.resolve() : Promise.all([
        load("../stylesheets/live-explorer.css"),
        load("tiny-gpt.js").then(function () { return load("live-explorer.js"); })
      ])).then(function () {
        return window.liveExplorer(figure, data, {el: el, button: button, paint: paint, inksOf: inksOf,
                                                  switchBar: switchBar, stepControls: stepControls});
      }).then(function () {
        open.remove();
      }, function (error) {
        open.disabled = false;
        open.textContent = "The model did not load (" + error.message + "): try again";
      });
    });
    open.classList.add("live-open");
    figure.prepend(open);
  }

  var cacheScript = null;

  function setupCache(figure) {
    cacheScript = cacheScript || (window.cacheExplorer ? Promise.resolve() : load("cache-explorer.js"));
    cacheScript.then(function () {
      window.cacheExplorer.setup(figure, {el: el, switchBar: switchBar, stepControls: stepControls});
    });
  }

  function start() {
    // The heads explorer first: it sets up the row explorer inside it.
    document.querySelectorAll(".heads-explorer").forEach(setupHeads);
    document.querySelectorAll(".attention-explorer[data-explorer]").forEach(setupRows);
    document.querySelectorAll(".stepper").forEach(setupStepper);
    document.querySelectorAll(".decode-explorer[data-decode]").forEach(setupDecode);
    document.querySelectorAll(".temperature-explorer[data-temperature]").forEach(setupTemperature);
    document.querySelectorAll(".live-explorer[data-live]").forEach(setupLive);
    document.querySelectorAll(".cache-explorer[data-cache]").forEach(setupCache);
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(start);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
