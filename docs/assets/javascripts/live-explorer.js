/* The live explorer of "Watching attention learn" (llm_attention_site.live_model): the
   reader types a sequence, the trained tiny GPT runs on it in the page (tiny-gpt.js), and
   the figure shows every head's weights for the chosen query position, the next token's
   probabilities at a temperature, and what PyTorch computed at build for the same input.
   A head's button switches it off (its context vectors zeroed, as GPTModel.ablate does).

   attention-explorer.js loads this script when the reader asks for the model, and calls
   window.liveExplorer(figure, data, ui) with the figure's data and its own helpers. The last
   run stays on the figure as figure.liveRun (every head's weights [L][H][T][T] and the
   probabilities [T][V]): the site's tests compare it with PyTorch, and a reader may look at
   it in the browser's console. */
(function () {
  "use strict";

  var MARK = "\u25b2";

  window.liveExplorer = function (figure, data, ui) {
    var url = new URL(data.file, location.href).href;
    return window.tinyGPT.load(url).then(function (model) { build(figure, data, ui, model); });
  };

  function build(figure, data, ui, model) {
    var el = ui.el, inks = ui.inksOf(figure);
    var symbols = data.symbols;
    var state = {text: data.examples[0].text, tokens: null, off: [], query: 0, temperature: 1,
                 run: null};

    // The controls: the examples run at build, a random sequence, the sequence itself.
    var controls = el("div", "live-controls");
    var examples = ui.switchBar(data.examples.map(function (e) { return e.name; }), function (k) {
      var example = data.examples[k];
      state.off = example.off.map(function (lh) { return lh.slice(); });
      input.value = example.text;
      compute(example.text, true);
    });
    var random = ui.button("Random sequence with a repeat", function () {
      var made = randomSequence(symbols.length, model.context, 8);
      input.value = made.tokens.map(function (t) { return symbols[t]; }).join("");
      compute(input.value, true, made.query);
    });
    random.classList.add("live-random");
    examples.bar.appendChild(random);
    var label = el("label", "live-label");
    label.appendChild(el("span", null, "Sequence "));
    var input = el("input", "live-input");
    input.type = "text";
    input.spellcheck = false;
    input.autocomplete = "off";
    input.setAttribute("autocapitalize", "characters");
    input.maxLength = model.context;  // the model's context: it reads no more tokens
    input.setAttribute("aria-describedby", "live-help live-error");
    label.appendChild(input);
    var help = el("p", "live-help", "One symbol per token, up to " + model.context + " of the " +
                  symbols.length + ": the letters A to Z and the digits 2 to 7.");
    help.id = "live-help";
    // What is wrong with the text typed, under the field and marked as such: the status
    // under the grid goes on describing the figure.
    var error = el("p", "live-error");
    error.id = "live-error";
    error.setAttribute("role", "alert");
    error.hidden = true;
    controls.append(examples.bar, label, error, help);
    figure.prepend(controls);

    var status = figure.querySelector(".live-status");
    status.setAttribute("aria-live", "polite");

    // The grid: one row per head, one column per token; its head buttons stay the same
    // elements from one input to the next, so that the focus stays on them.
    var table = figure.querySelector(".live-table");
    var headRow = table.tHead.rows[0], body = table.tBodies[0], marks = table.tFoot.rows[0];
    var buttons = [];
    Array.prototype.forEach.call(body.rows, function (row) {
      var layer = parseInt(row.dataset.layer, 10), head = parseInt(row.dataset.head, 10);
      var b = ui.button("L" + layer + " H" + head, function () {
        var at = indexOf(state.off, layer, head);
        if (at >= 0) state.off.splice(at, 1); else state.off.push([layer, head]);
        compute(state.text, false);
      });
      b.classList.add("live-head");
      // The name starts with the button's text (WCAG 2.5.3); pressed = the head at work, as
      // a pressed switch is on: a click switches it off (the button then stands out, its row
      // hatched).
      b.setAttribute("aria-label", "L" + layer + " H" + head + ": layer " + layer + ", head " +
                     head + " at work");
      row.cells[0].textContent = "";
      row.cells[0].appendChild(b);
      buttons.push({button: b, row: row, layer: layer, head: head});
    });
    table.tabIndex = 0;
    table.setAttribute("aria-label", "Every head's weights for the query: the arrow keys " +
                       "choose the query position, a head's button switches it off");
    table.addEventListener("keydown", function (event) {
      if (event.target !== table) return;
      var q = state.query, T = state.tokens.length;
      var next = {ArrowRight: q + 1, ArrowDown: q + 1, ArrowLeft: q - 1, ArrowUp: q - 1,
                  Home: 0, End: T - 1}[event.key];
      if (next === undefined) return;
      event.preventDefault();
      state.query = Math.max(0, Math.min(T - 1, next));
      render();
    });
    table.addEventListener("click", function (event) {  // a column: its token becomes the query
      var cell = event.target.closest && event.target.closest("td, th");
      if (!cell || cell.closest("tbody th") || !table.contains(cell)) return;
      var column = cell.cellIndex - 1;
      if (column >= 0 && column < state.tokens.length) { state.query = column; render(); }
    });

    // The next token: a temperature, the likeliest tokens, PyTorch's numbers at build.
    var next = figure.querySelector(".live-next");
    var probabilities = next.querySelector("tbody");
    var temperatures = data.temperatures;
    var setTemperature = ui.stepControls(next, temperatures.length, function (k) {
      return "temperature " + temperatures[k];
    }, function (k) { state.temperature = temperatures[k]; if (state.run) render(); },
    temperatures.indexOf(1), true, ["Colder", "Warmer"], temperatures);
    next.querySelector(".explorer-steps input").setAttribute("aria-label", "temperature");
    var check = el("p", "live-check");
    next.insertAdjacentElement("afterend", check);

    input.addEventListener("input", function () { compute(input.value, true); });

    // Read the text; run the model when it is a sequence it can take.
    function compute(text, newText, query) {
      var letters = text.toUpperCase().replace(/\s+/g, "");
      var unknown = letters.split("").filter(function (c) { return symbols.indexOf(c) < 0; });
      var problem = unknown.length ? quoted(unknown[0]) + " is not one of the symbols." :
        !letters.length ? "Type at least one symbol." :
        letters.length > model.context ? "At most " + model.context + " tokens: the model's context." : "";
      if (problem) {
        error.textContent = "Not run: " + problem + " The figure still shows " + state.text + ".";
        error.hidden = false;
        input.setAttribute("aria-invalid", "true");
        return;
      }
      if (newText) {  // the field's own text ran (a head switched runs the last good one)
        error.hidden = true;
        input.removeAttribute("aria-invalid");
      }
      state.text = letters;
      state.tokens = letters.split("").map(function (c) { return symbols.indexOf(c); });
      if (newText) state.query = query === undefined ? state.tokens.length - 1 : query;
      state.query = Math.min(state.query, state.tokens.length - 1);
      var run = window.tinyGPT.forward(model, state.tokens, state.off);
      state.run = run;
      figure.liveRun = {text: state.text, off: state.off.map(function (lh) { return lh.slice(); }),
                        weights: run.weights, probabilities: run.probabilities};
      render();
    }

    function render() {
      var tokens = state.tokens, T = tokens.length, q = state.query, run = state.run;
      var after = [];  // positions after an earlier occurrence of the query's token
      for (var p = 0; p < q; p++) if (tokens[p] === tokens[q]) after.push(p + 1);
      // The header: one symbol per token, the query's marked. A short sequence keeps cells
      // no wider than 3em: the grid's columns share its width, and two tokens stretched
      // theirs across the page.
      fit(headRow, T, "th");
      fit(marks, T, "td");
      table.style.maxWidth = "calc(4.4em + " + 3 * T + "em)";
      for (var j = 0; j < T; j++) {
        var th = headRow.cells[j + 1];
        th.textContent = symbols[tokens[j]];
        th.scope = "col";
        th.className = j === q ? "live-query" : "";
        marks.cells[j + 1].textContent = after.indexOf(j) >= 0 ? MARK : "";
      }
      buttons.forEach(function (b) {
        var off = indexOf(state.off, b.layer, b.head) >= 0;
        b.button.setAttribute("aria-pressed", String(!off));
        b.row.dataset.state = off ? "off" : "on";
        fit(b.row, T, "td");
        var weights = run.weights[b.layer][b.head][q];
        for (var j = 0; j < T; j++) {
          var cell = b.row.cells[j + 1];
          if (j <= q) {
            ui.paint(cell, Math.round(weights[j] * 100), inks);
          } else {
            cell.style.removeProperty("--w");
            cell.classList.remove("ink-light", "ink-dark-on-slate");
          }
        }
      });
      var token = quoted(symbols[tokens[q]]);
      var off = state.off.length ? " Switched off: " + state.off.map(function (lh) {
        return "layer " + lh[0] + " head " + lh[1];
      }).join(", ") + "." : "";
      var twice = after.length > 1;
      status.textContent = "Query at position " + q + ", " + token + ". " + (after.length ?
        token + " came before" + (twice ? (after.length === 2 ? " twice" : " " + after.length +
        " times") : "") + "; the token" +
        (twice ? "s" : "") + " after it (" + MARK + ", position" + (twice ? "s " : " ") +
        after.join(" and ") + ") " + (twice ? "are" : "is") + " where an induction head looks." :
        token + " has not come before: an induction head has nothing to find.") + off;
      // The next token after the query, at the temperature.
      var logits = run.logits[q];
      var probs = window.tinyGPT.softmax(Array.from(logits, function (v) { return v / state.temperature; }));
      var order = probs.map(function (v, i) { return i; })
        .sort(function (a, b) { return probs[b] - probs[a]; }).slice(0, 5);
      var rest = 1 - order.reduce(function (sum, i) { return sum + probs[i]; }, 0);
      var shown = order.map(function (i) { return [symbols[i], probs[i]]; })
        .concat([["other " + (probs.length - order.length), Math.max(0, rest)]]);
      Array.prototype.forEach.call(probabilities.rows, function (row, k) {
        row.cells[0].textContent = shown[k][0];
        row.cells[1].firstChild.style.width = (shown[k][1] * 100).toFixed(1) + "%";
        row.cells[2].textContent = shown[k][1].toFixed(4);
      });
      var caption = next.querySelector(".live-after") || el("p", "live-after");
      caption.textContent = "The next token after position " + q + " (" + token + "), at temperature " +
        state.temperature + ":";
      next.querySelector("table").insertAdjacentElement("beforebegin", caption);
      showCheck();
    }

    // Where the input is one of the examples, exactly as run at build: PyTorch's likeliest
    // next tokens after its last position, beside this page's.
    function showCheck() {
      var example = data.examples.filter(function (e) {
        return e.text === state.text && sameHeads(e.off, state.off);
      })[0];
      examples.buttons.forEach(function (b, k) {
        b.setAttribute("aria-pressed", String(data.examples[k] === example));
      });
      if (!example) { check.textContent = ""; return; }
      var last = state.run.probabilities[state.tokens.length - 1];
      var here = example.pytorch.map(function (sp) {
        return sp[0] + " " + last[symbols.indexOf(sp[0])].toFixed(4);
      });
      check.textContent = "After the last position, at temperature 1, PyTorch at build: " +
        example.pytorch.map(function (sp) { return sp[0] + " " + sp[1].toFixed(4); }).join(", ") +
        ". This page: " + here.join(", ") + ".";
    }

    input.value = state.text;
    compute(state.text, true);
    setTemperature(temperatures.indexOf(1));
    input.focus();
  }

  // Give a row count + 1 cells (its header first) of the kind tag.
  function fit(row, count, tag) {
    while (row.cells.length > count + 1) row.deleteCell(-1);
    while (row.cells.length < count + 1) row.appendChild(document.createElement(tag));
  }

  function indexOf(pairs, layer, head) {
    for (var k = 0; k < pairs.length; k++) if (pairs[k][0] === layer && pairs[k][1] === head) return k;
    return -1;
  }

  function sameHeads(a, b) {
    return a.length === b.length && a.every(function (lh) { return indexOf(b, lh[0], lh[1]) >= 0; });
  }

  function quoted(token) { return "\u201c" + token + "\u201d"; }

  // A sequence of the training task (llm_attention.induction.make_batch): `length` distinct
  // random ids, except that a segment of `segment` ids appears twice at random places;
  // the query is a position of the second copy whose next token the first copy gives.
  function randomSequence(vocab, length, segment) {
    var ids = [];
    for (var i = 0; i < vocab; i++) ids.push(i);
    for (i = vocab - 1; i > 0; i--) {  // a random order: the first `length` are distinct
      var j = Math.floor(Math.random() * (i + 1)), swap = ids[i];
      ids[i] = ids[j];
      ids[j] = swap;
    }
    var tokens = ids.slice(0, length);
    var first = Math.floor(Math.random() * (length - 2 * segment + 1));
    var room = length - segment - (first + segment) + 1;  // places left for the second copy
    var second = first + segment + Math.floor(Math.random() * room);
    for (i = 0; i < segment; i++) tokens[second + i] = tokens[first + i];
    return {tokens: tokens, query: second + Math.floor(Math.random() * (segment - 1))};
  }
})();
