"""Protocol conformance of `convoy serve`: every HTTP route and gRPC method driven at least once with a
valid call and once with misuse (an unknown model, a bad version, a malformed body, wrong types,
another method), each status checked against the one Triton gives. HTTP through urllib; gRPC
(conformance_grpc.py) through stubs generated at test time from apps/serve/grpc/*.proto with
python3-grpc-tools.

usage: conformance.py PROTO_DIR WORK_DIR HTTP_PORT GRPC_PORT MODEL SPARE_MODEL
The server runs with --model-control explicit and both models loaded; MODEL takes 1x28x28 images
(max batch 4), SPARE_MODEL is unloaded and loaded again. GRPC_PORT "-": HTTP only.
Prints one JSON object: {"cases": [{"route", "kind", "what", "want", "got"}, ...]}, where route is
a row of kEndpoints (apps/serve/endpoints.h) as "METHOD PATH", or "grpc METHOD"."""
import json
import struct
import sys
import urllib.error
import urllib.request
import zlib


class Cases:
    """The cases run so far, each with the status it should get and the one it got."""

    def __init__(self):
        self.cases = []

    def add(self, route, kind, what, want, got, detail=""):
        self.cases.append({"route": route, "kind": kind, "what": what, "want": want, "got": got, "detail": detail})


def png(width, height, value):
    """A gray PNG written by hand (zlib and struct, nothing to install)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + bytes([value]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def http_cases(port, model, spare, cases):
    def call(method, path, body=None, headers=None):
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), data=data, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def case(route, kind, what, want, method, path, body=None, headers=None, check=None):
        status, text = call(method, path, body, headers)
        detail = text[:300].decode(errors="replace")
        if status == want and check is not None and not check(text):
            status, detail = "unexpected body", detail
        cases.add(route, kind, what, want, status, detail)

    def has(key, value=None):
        return lambda text: key in json.loads(text) and (value is None or json.loads(text)[key] == value)

    m = "/v2/models/" + model
    pixels = [7] * 784
    infer = json.dumps({"id": "c1", "inputs": [{"name": "input", "datatype": "UINT8", "shape": [1, 1, 28, 28],
                                                "data": pixels}]})

    def infer_body(**change):
        body = json.loads(infer)
        body["inputs"][0].update(change)
        return json.dumps(body)

    r = "GET /v2"
    case(r, "valid", "server metadata", 200, "GET", "/v2", check=has("name", "convoy"))
    case(r, "misuse", "another method", 405, "POST", "/v2")
    case("GET /v2/health/live", "valid", "live", 200, "GET", "/v2/health/live")
    case("GET /v2/health/live", "misuse", "another method", 405, "POST", "/v2/health/live")
    case("GET /v2/health/ready", "valid", "ready", 200, "GET", "/v2/health/ready")
    case("GET /v2/health/ready", "misuse", "another method", 405, "DELETE", "/v2/health/ready")
    case("unknown", "misuse", "a path of no endpoint", 404, "GET", "/v2/nothing/here")

    r = "POST /v2/repository/index"
    case(r, "valid", "every model", 200, "POST", "/v2/repository/index",
         check=lambda t: {e["name"] for e in json.loads(t)} >= {model, spare})
    case(r, "valid", "the ready ones", 200, "POST", "/v2/repository/index", '{"ready": true}')
    case(r, "misuse", "malformed body", 400, "POST", "/v2/repository/index", "{")
    case(r, "misuse", "ready not a bool", 400, "POST", "/v2/repository/index", '{"ready": "yes"}')
    case(r, "misuse", "another method", 405, "GET", "/v2/repository/index")

    r = "POST /v2/repository/models/{model}/unload"
    case(r, "valid", "unload the spare model", 200, "POST", "/v2/repository/models/%s/unload" % spare)
    case(r, "misuse", "unknown model", 400, "POST", "/v2/repository/models/nope/unload")
    case(r, "misuse", "malformed body", 400, "POST", "/v2/repository/models/%s/unload" % model, "{")
    case(r, "misuse", "unload_dependents not a bool", 400, "POST", "/v2/repository/models/%s/unload" % model,
         '{"parameters": {"unload_dependents": "yes"}}')
    r = "POST /v2/repository/models/{model}/load"
    case(r, "valid", "load it again", 200, "POST", "/v2/repository/models/%s/load" % spare)
    case(r, "misuse", "unknown model", 400, "POST", "/v2/repository/models/nope/load")
    case(r, "misuse", "malformed body", 400, "POST", "/v2/repository/models/%s/load" % spare, "{")
    case(r, "misuse", "parameters not an object", 400, "POST", "/v2/repository/models/%s/load" % spare,
         '{"parameters": 3}')
    case(r, "misuse", "a config override (not supported)", 501, "POST", "/v2/repository/models/%s/load" % spare,
         '{"parameters": {"config": "{}"}}')

    case("GET /v2/models/stats", "valid", "every model's statistics", 200, "GET", "/v2/models/stats",
         check=has("model_stats"))
    case("GET /v2/models/stats", "misuse", "another method", 405, "POST", "/v2/models/stats")

    for suffix, name in (("", "metadata"), ("/config", "config"), ("/stats", "statistics")):
        r = "GET /v2/models/{model}[/versions/{version}]" + suffix
        case(r, "valid", name, 200, "GET", m + suffix)
        case(r, "valid", name + " of version 1", 200, "GET", m + "/versions/1" + suffix)
        case(r, "misuse", "unknown model", 404, "GET", "/v2/models/nope" + suffix)
        case(r, "misuse", "bad version", 400, "GET", m + "/versions/abc" + suffix)
        case(r, "misuse", "version 0", 400, "GET", m + "/versions/0" + suffix)
        case(r, "misuse", "a version not there", 404, "GET", m + "/versions/9" + suffix)
        case(r, "misuse", "another method", 405, "PUT", m + suffix)

    r = "GET /v2/models/{model}[/versions/{version}]/ready"
    case(r, "valid", "ready", 200, "GET", m + "/ready")
    case(r, "valid", "version 1 ready", 200, "GET", m + "/versions/1/ready")
    case(r, "misuse", "unknown model", 404, "GET", "/v2/models/nope/ready")
    case(r, "misuse", "a version not ready", 400, "GET", m + "/versions/9/ready")
    case(r, "misuse", "bad version", 400, "GET", m + "/versions/abc/ready")

    r = "POST /v2/models/{model}[/versions/{version}]/infer"
    case(r, "valid", "JSON tensors", 200, "POST", m + "/infer", infer, check=has("id", "c1"))
    header = json.dumps({"inputs": [{"name": "input", "datatype": "UINT8", "shape": [1, 1, 28, 28],
                                     "parameters": {"binary_data_size": 784}}],
                         "outputs": [{"name": "probabilities", "parameters": {"classification": 3}}]})
    case(r, "valid", "binary tensors, a classification", 200, "POST", m + "/versions/1/infer",
         header.encode() + bytes(784), {"Inference-Header-Content-Length": str(len(header))})
    case(r, "misuse", "unknown model", 404, "POST", "/v2/models/nope/infer", infer)
    case(r, "misuse", "bad version", 400, "POST", m + "/versions/abc/infer", infer)
    case(r, "misuse", "malformed body", 400, "POST", m + "/infer", '{"inputs": [')
    case(r, "misuse", "wrong datatype", 400, "POST", m + "/infer", infer_body(datatype="INT64"))
    case(r, "misuse", "wrong shape", 400, "POST", m + "/infer", infer_body(shape=[1, 1, 28, 27]))
    case(r, "misuse", "data of strings", 400, "POST", m + "/infer", infer_body(data=["7"] * 784))
    case(r, "misuse", "too few data", 400, "POST", m + "/infer", infer_body(data=pixels[:100]))
    case(r, "misuse", "an unknown output", 400, "POST", m + "/infer",
         json.dumps(dict(json.loads(infer), outputs=[{"name": "nope"}])))
    case(r, "misuse", "classification not an integer", 400, "POST", m + "/infer",
         json.dumps(dict(json.loads(infer), outputs=[{"name": "logits", "parameters": {"classification": "3"}}])))
    case(r, "misuse", "a header length past the body", 400, "POST", m + "/infer", header.encode(),
         {"Inference-Header-Content-Length": str(len(header) + 10)})
    case(r, "misuse", "another method", 405, "GET", m + "/infer")

    r = "POST /v2/models/{model}[/versions/{version}]/classify"
    case(r, "valid", "a PNG", 200, "POST", m + "/classify?top_k=2", png(28, 28, 128), check=has("top_k"))
    case(r, "misuse", "unknown model", 404, "POST", "/v2/models/nope/classify", png(28, 28, 128))
    case(r, "misuse", "not an image", 400, "POST", m + "/versions/1/classify", b"GIF89a no")
    case(r, "misuse", "top_k 0", 400, "POST", m + "/classify?top_k=0", png(28, 28, 128))

    for path, route in (("/v2/trace/setting", "/v2/trace/setting"), (m + "/trace/setting", "/v2/models/{model}/trace/setting")):
        case("GET " + route, "valid", "the settings", 200, "GET", path, check=has("trace_mode", "triton"))
        case("GET " + route, "misuse", "another method", 405, "PUT", path)
        r = "POST " + route
        case(r, "valid", "set trace_rate", 200, "POST", path, '{"trace_rate": "7"}', check=has("trace_rate", "7"))
        case(r, "valid", "clear it", 200, "POST", path, '{"trace_rate": null}', check=has("trace_rate", "1000"))
        case(r, "misuse", "malformed body", 400, "POST", path, "{")
        case(r, "misuse", "a number, not a string", 400, "POST", path, '{"trace_rate": 7}')
        case(r, "misuse", "trace level TENSORS (not supported)", 400, "POST", path, '{"trace_level": ["TENSORS"]}')
        case(r, "misuse", "the trace file (not over the network)", 501, "POST", path, '{"trace_file": "/tmp/x"}')
    case("GET /v2/models/{model}/trace/setting", "misuse", "unknown model", 400, "GET", "/v2/models/nope/trace/setting")
    case("POST /v2/models/{model}/trace/setting", "misuse", "unknown model", 400, "POST",
         "/v2/models/nope/trace/setting", "{}")

    case("GET /v2/logging", "valid", "the settings", 200, "GET", "/v2/logging", check=has("log_verbose_level", 0))
    case("GET /v2/logging", "misuse", "another method", 405, "DELETE", "/v2/logging")
    r = "POST /v2/logging"
    case(r, "valid", "set log_format", 200, "POST", "/v2/logging", '{"log_format": "default", "log_verbose_level": 0}',
         check=has("log_format", "default"))
    case(r, "misuse", "malformed body", 400, "POST", "/v2/logging", "{")
    case(r, "misuse", "log_info not a bool", 400, "POST", "/v2/logging", '{"log_info": "yes"}')
    case(r, "misuse", "a negative verbose level", 400, "POST", "/v2/logging", '{"log_verbose_level": -1}')
    case(r, "misuse", "an unknown format", 400, "POST", "/v2/logging", '{"log_format": "xml"}')
    case(r, "misuse", "the log file (not over the network)", 501, "POST", "/v2/logging", '{"log_file": "/tmp/x"}')

    shared_memory_cases(case)


# Triton's system and CUDA shared-memory extensions: a real POSIX object registered, listed and
# unregistered; a CUDA handle is valid only on a GPU build with a GPU, elsewhere refused with 400.
def shared_memory_cases(case):
    from multiprocessing import shared_memory
    seg = shared_memory.SharedMemory(create=True, size=4096)
    try:
        key = "/" + seg.name
        reg = lambda region: "/v2/systemsharedmemory/region/%s/register" % region
        body = lambda k, size: json.dumps({"key": k, "offset": 0, "byte_size": size})
        r = "POST /v2/systemsharedmemory/region/{region}/register"
        case(r, "valid", "a POSIX object", 200, "POST", reg("c1"), body(key, 4096))
        case(r, "misuse", "a name registered twice", 400, "POST", reg("c1"), body(key, 4096))
        case(r, "misuse", "no such object", 400, "POST", reg("c2"), body("/convoy-conformance-none", 64))
        case(r, "misuse", "malformed body", 400, "POST", reg("c3"), "{")
        r = "GET /v2/systemsharedmemory[/region/{region}]/status"
        case(r, "valid", "every region", 200, "GET", "/v2/systemsharedmemory/status")
        case(r, "valid", "one region", 200, "GET", "/v2/systemsharedmemory/region/c1/status")
        case(r, "misuse", "a region not registered", 404, "GET", "/v2/systemsharedmemory/region/nope/status")
        r = "POST /v2/systemsharedmemory[/region/{region}]/unregister"
        case(r, "valid", "one region", 200, "POST", "/v2/systemsharedmemory/region/c1/unregister")
        case(r, "valid", "every region", 200, "POST", "/v2/systemsharedmemory/unregister")
        case(r, "misuse", "another method", 405, "GET", "/v2/systemsharedmemory/region/c1/unregister")
    finally:
        seg.close()
        seg.unlink()
    r = "GET /v2/cudasharedmemory[/region/{region}]/status"
    case(r, "valid", "every region", 200, "GET", "/v2/cudasharedmemory/status")
    case(r, "misuse", "a region not registered", 404, "GET", "/v2/cudasharedmemory/region/nope/status")
    r = "POST /v2/cudasharedmemory/region/{region}/register"
    handle = json.dumps({"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 64})
    case(r, "valid", "a handle (no GPU here, or not a real handle: refused, saying why)", 400, "POST",
         "/v2/cudasharedmemory/region/g1/register", handle)
    case(r, "misuse", "malformed body", 400, "POST", "/v2/cudasharedmemory/region/g1/register", "{")
    r = "POST /v2/cudasharedmemory[/region/{region}]/unregister"
    case(r, "valid", "every region", 200, "POST", "/v2/cudasharedmemory/unregister")
    case(r, "misuse", "another method", 405, "GET", "/v2/cudasharedmemory/unregister")


def main():
    proto_dir, work_dir, http_port, grpc_port, model, spare = sys.argv[1:7]
    cases = Cases()
    http_cases(http_port, model, spare, cases)
    if grpc_port != "-":
        import conformance_grpc  # needs python3-grpc-tools, which HTTP alone does not
        conformance_grpc.grpc_cases(proto_dir, work_dir, grpc_port, model, spare, cases)
    print(json.dumps({"cases": cases.cases}))


if __name__ == "__main__":
    main()
