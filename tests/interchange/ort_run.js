#!/usr/bin/env node
// Runs an ONNX model in ONNX Runtime (npm's onnxruntime-node, CPU) for the ONNX export tests.
//
//   node ort_run.js logits MODEL.onnx INPUT.f32 N C H W OUT.f32
//       raw little-endian float32 (N, C, H, W) into the first input, the first output (N, classes) out
//   node ort_run.js top1 MODEL.onnx IMAGES-idx3-ubyte.gz MEAN STD LIMIT OUT.txt
//       Fashion-MNIST images (IDX, gzip) scaled to [0, 1] and normalized with MEAN and STD
//       (one channel), in batches of 500; the top-1 class of each image, one per line
//
// The package is found under $ORT_NODE_MODULES, else third_party/node/node_modules of the
// repository (scripts/install-onnxruntime-node.sh). Exit status 3: it is not installed.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const modules = process.env.ORT_NODE_MODULES || path.join(__dirname, '..', '..', 'third_party', 'node', 'node_modules');
let ort;
try {
  ort = require(path.join(modules, 'onnxruntime-node'));
} catch (e) {
  console.error('onnxruntime-node is not installed under ' + modules + ' (bash scripts/install-onnxruntime-node.sh): ' + e.message);
  process.exit(3);
}

function floats(buffer) {  // a copy: the Buffer's offset need not be 4-byte aligned
  const out = new Float32Array(buffer.length / 4);
  for (let i = 0; i < out.length; ++i) out[i] = buffer.readFloatLE(4 * i);
  return out;
}

async function logits(args) {
  const [model, input, n, c, h, w, out] = args;
  const session = await ort.InferenceSession.create(model);
  const dims = [n, c, h, w].map(Number);
  const x = new ort.Tensor('float32', floats(fs.readFileSync(input)), dims);
  const y = (await session.run({ [session.inputNames[0]]: x }))[session.outputNames[0]];
  const bytes = Buffer.alloc(y.data.length * 4);
  y.data.forEach((v, i) => bytes.writeFloatLE(v, 4 * i));
  fs.writeFileSync(out, bytes);
  console.log('ort: logits ' + JSON.stringify(y.dims));
}

async function top1(args) {
  const [model, images, mean, std, limit, out] = args;
  const raw = zlib.gunzipSync(fs.readFileSync(images));
  if (raw.readUInt32BE(0) !== 0x803) throw new Error(images + ': not an IDX image file');
  const count = Math.min(raw.readUInt32BE(4), Number(limit) > 0 ? Number(limit) : Infinity);
  const rows = raw.readUInt32BE(8), cols = raw.readUInt32BE(12), pixels = rows * cols;
  const session = await ort.InferenceSession.create(model);
  const lines = [];
  for (let start = 0; start < count; start += 500) {
    const n = Math.min(500, count - start);
    const x = new Float32Array(n * pixels);
    for (let i = 0; i < n * pixels; ++i) x[i] = (raw[16 + start * pixels + i] / 255 - Number(mean)) / Number(std);
    const y = (await session.run({ input: new ort.Tensor('float32', x, [n, 1, rows, cols]) })).logits;
    const classes = y.dims[1];
    for (let b = 0; b < n; ++b) {
      let best = 0;
      for (let k = 1; k < classes; ++k) if (y.data[b * classes + k] > y.data[b * classes + best]) best = k;
      lines.push(String(best));
    }
  }
  fs.writeFileSync(out, lines.join('\n') + '\n');
  console.log('ort: ' + count + ' images');
}

const [mode, ...rest] = process.argv.slice(2);
(mode === 'logits' ? logits(rest) : mode === 'top1' ? top1(rest) : Promise.reject(new Error('unknown mode ' + mode)))
  .catch((e) => { console.error('ort_run: ' + e.message); process.exit(1); });
