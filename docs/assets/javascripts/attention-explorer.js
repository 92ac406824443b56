/* Explorable attention weights (llm_attention_site.explorer). Every number was computed in Python
   at build and sits in the figure's data-explorer attribute; this script only displays them:
   a switch per state, and the weights of the query under the pointer, the finger or the
   keyboard focus (arrow keys move between queries). Without it, the table stays a still
   picture of the first state. */
(function () {
  "use strict";

  // The ink threshold comes from Python (explorer.LIGHT_INK_FROM), so the still table and
  // the live one agree; the stylesheet turns all ink white in the dark palette.
  function cellStyle(cell, value, lightFrom) {
    cell.style.background = "rgba(33, 102, 172, " + value.toFixed(3) + ")";
    cell.classList.toggle("ink-light", value >= lightFrom);
  }

  function setup(figure) {
    if (figure.dataset.ready) return;
    figure.dataset.ready = "1";
    var data = JSON.parse(figure.dataset.explorer);
    var lightFrom = parseFloat(figure.dataset.lightInkFrom);
    var names = Object.keys(data.states);
    var state = names[0];
    var query = 0;
    var table = figure.querySelector("table");
    var rows = table.tBodies[0].rows;
    var buttons = [];

    var readout = document.createElement("div");
    readout.className = "explorer-readout";
    readout.setAttribute("aria-live", "polite");
    table.insertAdjacentElement("afterend", readout);

    var switches = [];
    if (names.length > 1) {
      var bar = document.createElement("div");
      bar.className = "explorer-switches";
      bar.setAttribute("role", "group");
      names.forEach(function (name) {
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = name;
        b.dataset.state = name;
        b.addEventListener("click", function () { state = name; render(); });
        bar.appendChild(b);
        switches.push(b);
      });
      figure.insertBefore(bar, table);
    }

    Array.prototype.forEach.call(rows, function (row, i) {
      var th = row.cells[0];
      var b = document.createElement("button");
      b.type = "button";
      b.className = "explorer-query";
      b.textContent = th.textContent;
      th.textContent = "";
      th.appendChild(b);
      buttons.push(b);
      var pick = function () { query = i; render(); };
      b.addEventListener("mouseenter", pick);
      b.addEventListener("focus", pick);
      b.addEventListener("click", pick);
      b.addEventListener("keydown", function (event) {
        var step = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 }[event.key];
        if (!step) return;
        event.preventDefault();
        buttons[(i + step + buttons.length) % buttons.length].focus();
      });
    });

    function render() {
      var weights = data.states[state];
      Array.prototype.forEach.call(rows, function (row, i) {
        row.classList.toggle("explorer-selected", i === query);
        for (var j = 0; j < data.tokens.length; j++) {
          var cell = row.cells[j + 1];
          cell.textContent = weights[i][j];
          cellStyle(cell, parseFloat(weights[i][j]), lightFrom);
        }
      });
      switches.forEach(function (b) {
        b.setAttribute("aria-pressed", String(b.dataset.state === state));
      });
      readout.textContent = "";
      var title = document.createElement("p");
      title.textContent = "\u201c" + data.tokens[query] + "\u201d attends to (" + state + "):";
      readout.appendChild(title);
      data.tokens.forEach(function (token, j) {
        var line = document.createElement("div");
        line.className = "explorer-bar";
        var label = document.createElement("span");
        label.textContent = token;
        var track = document.createElement("span");
        track.className = "explorer-track";
        var fill = document.createElement("span");
        fill.style.width = (parseFloat(weights[query][j]) * 100).toFixed(1) + "%";
        track.appendChild(fill);
        var value = document.createElement("span");
        value.className = "explorer-value";
        value.textContent = weights[query][j];
        line.append(label, track, value);
        readout.appendChild(line);
      });
    }
    render();
  }

  function start() {
    document.querySelectorAll(".attention-explorer[data-explorer]").forEach(setup);
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(start);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
