-- wrk script for benchmarks/serve/load_test.sh: POSTs one prepared KServe v2 request (Triton's
-- binary tensor format) from $SERVE_BODY, with its header length from $SERVE_HEADER_LENGTH.
local f = assert(io.open(os.getenv("SERVE_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = os.getenv("SERVE_HEADER_LENGTH")

function done(summary, latency, requests)
  io.write(string.format("SERVE requests=%d seconds=%.3f non2xx=%d errors=%d p50_ms=%.3f p99_ms=%.3f\n",
    summary.requests, summary.duration / 1e6, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
