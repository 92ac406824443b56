/* The tiny GPT of "Watching attention learn", run in the reader's browser.

   GPTModel.forward (src/llm_attention/gpt.py) in eval mode, with MultiHeadAttention's
   explicit path (src/llm_attention/multihead.py), on one sequence: the same steps in the
   same order, each under a comment that quotes the Python line it mirrors ("// gpt.py: ...";
   tests/test_live_model.py checks that each quoted line is in that file). It keeps what
   record_attention() keeps, every head's weights, and can switch heads off as ablate()
   does. Dropout does nothing in eval mode, so no step stands for it. The numbers are
   float64 on float32 weights; the site's tests run PyTorch in float64 on the same weights
   and allow a difference of 1e-9 (live_model.BROWSER_TOLERANCE; rounding gives about 1e-16).

   The weights come from the file the build writes beside the page
   (llm_attention_site.live_model.weights_file, in the safetensors layout), with the two
   numbers the shapes do not give: the heads per layer and the layer norms' epsilon. Loaded
   only when the reader opens the live explorer (live-explorer.js). */
(function () {
  "use strict";

  // The file: 8 bytes holding the header's length, the JSON header (each tensor's dtype,
  // shape and byte range after the header), then little-endian float32 numbers.
  function readWeights(buffer) {
    var view = new DataView(buffer);
    var length = view.getUint32(0, true) + view.getUint32(4, true) * 4294967296;
    var header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, length)));
    var tensors = {};
    Object.keys(header).forEach(function (name) {
      if (name === "__metadata__") return;
      var entry = header[name], range = entry.data_offsets;
      if (entry.dtype !== "F32") throw new Error(name + ": expected F32, got " + entry.dtype);
      tensors[name] = {shape: entry.shape,
                       data: new Float32Array(buffer, 8 + length + range[0], (range[1] - range[0]) / 4)};
    });
    var metadata = header.__metadata__ || {};
    var numHeads = parseInt(metadata.num_heads, 10), eps = parseFloat(metadata.layer_norm_eps);
    if (!(numHeads > 0) || !(eps > 0)) {
      throw new Error("the file's metadata must give num_heads and layer_norm_eps, got " +
                      JSON.stringify(metadata));
    }
    return {tensors: tensors, numHeads: numHeads, layerNormEps: eps};
  }

  // nn.Linear: y = x W^T + b, W of shape (out, in) stored row by row. x: T rows.
  function linear(x, weight, bias) {
    var out = weight.shape[0], size = weight.shape[1], w = weight.data;
    return x.map(function (row) {
      var y = new Float64Array(out);
      for (var o = 0; o < out; o++) {
        var sum = bias ? bias.data[o] : 0;
        for (var i = 0; i < size; i++) sum += w[o * size + i] * row[i];
        y[o] = sum;
      }
      return y;
    });
  }

  // gpt.py: self.norm1 = nn.LayerNorm(emb_dim)
  // Over each row, (x - mean) / sqrt(variance + eps), the variance without Bessel's
  // correction, then times weight plus bias, as PyTorch computes it; eps is the model's,
  // from the file (PyTorch's default, 1e-5, for this model).
  function layerNorm(x, norm, eps) {
    return x.map(function (row) {
      var d = row.length, mean = 0, variance = 0;
      for (var i = 0; i < d; i++) mean += row[i] / d;
      for (i = 0; i < d; i++) variance += (row[i] - mean) * (row[i] - mean) / d;
      var y = new Float64Array(d), scale = 1 / Math.sqrt(variance + eps);
      for (i = 0; i < d; i++) y[i] = (row[i] - mean) * scale * norm.weight.data[i] + norm.bias.data[i];
      return y;
    });
  }

  // gpt.py: nn.GELU(approximate="tanh"),
  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), PyTorch's formula for it.
  function gelu(x) {
    return x.map(function (row) {
      return row.map(function (v) {
        return 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v)));
      });
    });
  }

  function add(x, y) {
    return x.map(function (row, t) { return row.map(function (v, i) { return v + y[t][i]; }); });
  }

  // Softmax of one row (an array of numbers, -Infinity giving 0), as a plain array.
  function softmax(row) {
    var top = Math.max.apply(null, row), sum = 0;
    var e = Array.from(row, function (v) { var z = Math.exp(v - top); sum += z; return z; });
    return e.map(function (v) { return v / sum; });
  }

  // MultiHeadAttention._forward_explicit (multihead.py), without cache or padding; heads in
  // off (a set of head numbers) have their context vectors zeroed before out_proj, as
  // GPTModel.ablate does. Returns the output and every head's weights, [H][T][T].
  function attention(x, att, numHeads, off) {
    var T = x.length, headDim = att.W_query.weight.shape[0] / numHeads;
    // multihead.py: keys = self.W_key(x)  # (B, T, d_out)
    var keys = linear(x, att.W_key.weight, att.W_key.bias);
    // multihead.py: queries = self.W_query(x)  # (B, T, d_out)
    var queries = linear(x, att.W_query.weight, att.W_query.bias);
    // multihead.py: values = self.W_value(x)  # (B, T, d_out)
    var values = linear(x, att.W_value.weight, att.W_value.bias);
    var weights = [], context = x.map(function () { return new Float64Array(numHeads * headDim); });
    for (var h = 0; h < numHeads; h++) {  // head h: columns h * d_h .. (h + 1) * d_h - 1
      var from = h * headDim, rows = [];
      for (var t = 0; t < T; t++) {
        // multihead.py: attn_scores = queries @ keys.transpose(2, 3)
        var scores = [];
        for (var j = 0; j < T; j++) {
          var dot = 0;
          for (var c = from; c < from + headDim; c++) dot += queries[t][c] * keys[j][c];
          scores.push(dot);
        }
        // multihead.py: attn_scores /= self.head_dim**0.5  # (B, H, T, T)
        scores = scores.map(function (s) { return s / Math.sqrt(headDim); });
        // multihead.py: attn_scores.masked_fill_(mask_bool, -torch.inf)  # (B, H, T, T)
        scores = scores.map(function (s, key) { return key > t ? -Infinity : s; });
        // multihead.py: attn_weights = torch.softmax(attn_scores, dim=-1)  # (B, H, T, T)
        var row = softmax(scores);
        rows.push(row);
        // multihead.py: context_vec = attn_weights @ values  # (B, H, T, d_h)
        if (off.has(h)) continue;  // ablate(): this head's context vector stays zero
        for (j = 0; j <= t; j++) {
          for (c = from; c < from + headDim; c++) context[t][c] += row[j] * values[j][c];
        }
      }
      weights.push(rows);
    }
    // multihead.py: context_vec = self.out_proj(context_vec)  # (B, T, d_out)
    return {out: linear(context, att.out_proj.weight, att.out_proj.bias), weights: weights};
  }

  // The tensors of one module, by name: "trf_blocks.0.att" -> {W_query: {weight}, ...}.
  function module(tensors, prefix) {
    var found = {};
    Object.keys(tensors).forEach(function (name) {
      if (name.indexOf(prefix + ".") !== 0) return;
      var parts = name.slice(prefix.length + 1).split("."), at = found;
      for (var k = 0; k < parts.length - 1; k++) at = at[parts[k]] = at[parts[k]] || {};
      at[parts[parts.length - 1]] = tensors[name];
    });
    return found;
  }

  // GPTModel.forward on tokens (ids), heads switched off as [[layer, head], ...]: every
  // head's weights [L][H][T][T], the logits [T][V] and the probabilities [T][V].
  function forward(model, tokens, switchedOff) {
    var t = model.tensors, d = t["tok_emb.weight"].shape[1];
    var row = function (table, i) { return Float64Array.from(table.data.subarray(i * d, (i + 1) * d)); };
    // gpt.py: x = self.tok_emb(tokens) + self.pos_emb(positions)  # (B, T, d) + (T or B, T, d)
    var x = tokens.map(function (id, position) {
      var e = row(t["tok_emb.weight"], id), p = row(t["pos_emb.weight"], position);
      return e.map(function (v, i) { return v + p[i]; });
    });
    var weights = [];
    for (var layer = 0; layer < model.numLayers; layer++) {
      var block = module(t, "trf_blocks." + layer);
      var off = new Set(switchedOff.filter(function (lh) { return lh[0] === layer; })
                                   .map(function (lh) { return lh[1]; }));
      // gpt.py: attended = self.att(self.norm1(x), padding_mask, cache=cache)  # (B, T, d)
      var attended = attention(layerNorm(x, block.norm1, model.layerNormEps), block.att,
                               model.numHeads, off);
      weights.push(attended.weights);
      // gpt.py: x = x + self.drop_shortcut(attended)  # (B, T, d)
      x = add(x, attended.out);
      // gpt.py: return x + self.drop_shortcut(self.ff(self.norm2(x)))  # (B, T, d)
      var ff = block.ff;  // nn.Sequential: 0 Linear(d, 4d), 1 GELU, 2 Linear(4d, d)
      var normed = layerNorm(x, block.norm2, model.layerNormEps);
      x = add(x, linear(gelu(linear(normed, ff["0"].weight, ff["0"].bias)),
                        ff["2"].weight, ff["2"].bias));
    }
    // gpt.py: return self.out_head(self.final_norm(x))  # (B, T, d) -> (B, T, V)
    var logits = linear(layerNorm(x, module(t, "final_norm"), model.layerNormEps),
                        t["out_head.weight"], null);
    return {weights: weights, logits: logits, probabilities: logits.map(softmax)};
  }

  // Fetch and read the weights file; resolves to a model for forward().
  function load(url) {
    return fetch(url).then(function (response) {
      if (!response.ok) throw new Error(url + ": " + response.status);
      return response.arrayBuffer();
    }).then(function (buffer) {
      var read = readWeights(buffer), layers = 0;
      while (read.tensors["trf_blocks." + layers + ".norm1.weight"]) layers++;
      return {tensors: read.tensors, numHeads: read.numHeads, layerNormEps: read.layerNormEps,
              numLayers: layers,
              vocabSize: read.tensors["tok_emb.weight"].shape[0],
              context: read.tensors["pos_emb.weight"].shape[0]};
    });
  }

  window.tinyGPT = {load: load, forward: forward, softmax: softmax};
})();
