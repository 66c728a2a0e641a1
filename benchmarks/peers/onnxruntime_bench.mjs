// ONNX Runtime peer of `convoy bench` through npm's onnxruntime-node (its CPU library), for
// machines without Python's onnxruntime. pytorch_bench.py exports the ONNX model (u8 images in,
// normalization inside, as for the Python peer) and runs this script per case.
//
// usage: node onnxruntime_bench.mjs --model M.onnx --shape N,C,H,W --threads T \
//          [--timing '{...}'] [--input-sets 4] [--seed 1]
// Prints one JSON object on stdout: median, spread, stable, warmup_iterations, rounds,
// iterations_per_round, latencies, p50, p99, seconds (seconds per iteration), as
// convoy_model.measure() returns; and onnxruntime_version.
//
// Method (Convoy's measure_iterations): synchronized warm-up (at least warmup_iterations and
// warmup_seconds), rounds of k iterations (k from the warm-up so a round lasts round_seconds)
// until the last 3 agree within stable_spread or a cap, then single iterations for p50/p99.
// session.run() is asynchronous in Node; each iteration is awaited, so an iteration is one
// complete inference, as a Convoy iteration is.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const nodeDir = process.env.CONVOY_ORT_NODE_DIR || path.join(here, "..", "..", "third_party", "node");
const require = createRequire(path.join(nodeDir, "node_modules", "noop.js"));

function parseArgs(argv) {
  const args = { threads: 0, inputSets: 4, seed: 1, timing: null };
  for (let i = 2; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (v === undefined) throw new Error(`${k}: missing value`);
    if (k === "--model") args.model = v;
    else if (k === "--shape") args.shape = v.split(",").map(Number);
    else if (k === "--threads") args.threads = Number(v);
    else if (k === "--timing") args.timing = JSON.parse(v);
    else if (k === "--input-sets") args.inputSets = Number(v);
    else if (k === "--seed") args.seed = Number(v);
    else throw new Error(`unknown argument ${k}`);
  }
  if (!args.model || !args.shape || args.shape.length !== 4) throw new Error("give --model M.onnx --shape N,C,H,W");
  return args;
}

const DEFAULT_TIMING = { warmup_iterations: 3, warmup_seconds: 0.5, round_seconds: 0.2, min_rounds: 3,
  max_rounds: 30, stable_spread: 0.02, max_seconds: 30, latency_samples: 200, latency_seconds: 3 };

function percentile(values, q) {
  if (!values.length) return 0;
  const v = [...values].sort((a, b) => a - b);
  const pos = Math.min(Math.max(q, 0), 1) * (v.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(v.length - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

function spreadOf(rounds) {
  if (rounds.length < 2) return 0;
  const last = rounds.slice(-3);
  const mid = percentile(last, 0.5);
  return mid > 0 ? (Math.max(...last) - Math.min(...last)) / mid : 0;
}

const clock = () => Number(process.hrtime.bigint()) / 1e9;

async function measure(step, t) {
  const start = clock();
  const warm = [];
  for (;;) {
    const a = clock();
    await step();
    warm.push(clock() - a);
    const elapsed = clock() - start;
    if (warm.length >= t.warmup_iterations && elapsed >= t.warmup_seconds) break;
    if (warm.length >= 2 && elapsed >= 0.25 * t.max_seconds) break;
  }
  const recent = (warm.length > 1 ? warm.slice(1) : warm).slice(-3);
  const estimate = Math.max(1e-9, percentile(recent, 0.5));
  const k = Math.trunc(Math.min(Math.max(Math.round(t.round_seconds / estimate), 1), 1e6));
  const timed = async (n) => {
    const a = clock();
    for (let i = 0; i < n; ++i) await step();
    return clock() - a;
  };
  const rounds = [];
  let stable = false;
  let spread = 0;
  for (;;) {
    rounds.push((await timed(k)) / k);
    spread = spreadOf(rounds);
    if (rounds.length >= t.min_rounds && spread <= t.stable_spread) { stable = true; break; }
    if (rounds.length >= t.min_rounds && (rounds.length >= t.max_rounds || clock() - start >= t.max_seconds)) break;
  }
  // Rounds of one iteration are latency samples already; the phase still runs after them (as
  // convoy bench's does), so that a slow pass's p99 is more than the slowest of a few rounds.
  const latencies = k === 1 ? [...rounds] : [];
  const latStart = clock();
  while (latencies.length < t.latency_samples) {
    latencies.push(await timed(1));
    if (clock() - latStart >= t.latency_seconds) break;
  }
  return { median: percentile(rounds, 0.5), spread, stable, warmup_iterations: warm.length, rounds: rounds.length,
    iterations_per_round: k, latencies, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99),
    seconds: clock() - start };
}

// A small deterministic generator (xorshift32) for the u8 images: ONNX Runtime's speed does not
// depend on the values, only that the input sets differ.
function randomBytes(n, seed) {
  const out = new Uint8Array(n);
  let s = (seed >>> 0) || 1;
  for (let i = 0; i < n; ++i) {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    out[i] = s & 255;
  }
  return out;
}

async function main() {
  const args = parseArgs(process.argv);
  const ort = require("onnxruntime-node");
  const version = require("onnxruntime-node/package.json").version;
  const options = { executionProviders: ["cpu"], graphOptimizationLevel: "all", interOpNumThreads: 1,
    executionMode: "sequential" };
  if (args.threads > 0) options.intraOpNumThreads = args.threads;
  const session = await ort.InferenceSession.create(args.model, options);
  const count = args.shape.reduce((a, b) => a * b, 1);
  const feeds = [];
  for (let i = 0; i < args.inputSets; ++i)
    feeds.push({ [session.inputNames[0]]: new ort.Tensor("uint8", randomBytes(count, args.seed * 1000003 + i), args.shape) });
  let it = 0;
  let last = null;
  const step = async () => {
    const out = await session.run(feeds[it % feeds.length]);
    it += 1;
    last = out[session.outputNames[0]];
  };
  const result = await measure(step, { ...DEFAULT_TIMING, ...(args.timing || {}) });
  if (!last.data.every(Number.isFinite)) throw new Error("non-finite logits");
  result.onnxruntime_version = version;
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((e) => {
  process.stderr.write(`onnxruntime_bench.mjs: ${e.message}\n`);
  process.exit(1);
});
