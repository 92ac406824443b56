// Typeset TeX with the vendored KaTeX, for hooks/typeset_math.py: one JSON request per input line,
// [tex, displayMode], answered by one JSON line: {"html": ...} or {"error": ...}.
const path = require("path");
const readline = require("readline");
const katex = require(path.join(__dirname, "..", "docs", "assets", "vendor", "katex", "katex.min.js"));

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const [tex, displayMode] = JSON.parse(line);
  let answer;
  try {
    answer = { html: katex.renderToString(tex, { displayMode, throwOnError: true }) };
  } catch (error) {
    answer = { error: String(error.message || error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
