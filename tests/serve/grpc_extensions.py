"""Triton's statistics and classification extensions over gRPC, for the serve tests: stubs
generated at test time from apps/serve/grpc/kserve_v2.proto (grpc_stubs.py).

usage: grpc_extensions.py PROTO_DIR WORK_DIR HTTP_PORT GRPC_PORT MODEL PIXELS_FILE N
In order: 3 plain ModelInfer calls of the N images (UINT8, N x 1 x 28 x 28); one asking for
probabilities with classification 3 and logits with classification 10; refused classifications
(0, -1, 11, a string_param); then ModelStatistics for every model, for MODEL and for MODEL version
1, each beside the HTTP statistics of the same scope parsed strictly (json_format.Parse with
ignore_unknown_fields=False) into ModelStatisticsResponse. Prints one JSON object."""
import json
import struct
import sys
import urllib.request

from grpc_stubs import code_of, generate


def bytes_elements(raw):
    out = []
    while raw:
        (n,) = struct.unpack("<I", raw[:4])
        out.append(raw[4:4 + n].decode())
        raw = raw[4 + n:]
    return out


def main():
    proto_dir, work_dir, http_port, grpc_port, model, pixels_file, n = sys.argv[1:8]
    n = int(n)
    generate(proto_dir, work_dir)
    import grpc
    from google.protobuf import json_format
    import kserve_v2_pb2 as pb
    import kserve_v2_pb2_grpc as rpc

    stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:" + grpc_port))
    pixels = open(pixels_file, "rb").read()

    def request(outputs=()):
        req = pb.ModelInferRequest(model_name=model)
        req.inputs.add(name="input", datatype="UINT8", shape=[n, 1, 28, 28])
        req.raw_input_contents.append(pixels)
        for name, k in outputs:
            o = req.outputs.add(name=name)
            if isinstance(k, str):
                o.parameters["classification"].string_param = k
            else:
                o.parameters["classification"].int64_param = k
        return req

    out = {"plain": []}
    for _ in range(3):
        r = stub.ModelInfer(request(), timeout=30)
        out["plain"].append({o.name: list(struct.unpack("<%df" % (len(b) // 4), b))
                             for o, b in zip(r.outputs, r.raw_output_contents)})
    r = stub.ModelInfer(request([("probabilities", 3), ("logits", 10)]), timeout=30)
    out["classified"] = {o.name: {"datatype": o.datatype, "shape": list(o.shape), "data": bytes_elements(b)}
                         for o, b in zip(r.outputs, r.raw_output_contents)}

    out["bad_k"] = {str(k): code_of(stub.ModelInfer, request([("probabilities", k)])) for k in (0, -1, 11, "3")}

    def as_dict(message):
        return json_format.MessageToDict(message, preserving_proto_field_name=True)

    out["stats"] = {}
    for scope, name, version, path in (("all", "", "", "/v2/models/stats"), ("model", model, "", "/v2/models/%s/stats" % model),
                                       ("version", model, "1", "/v2/models/%s/versions/1/stats" % model)):
        from_grpc = stub.ModelStatistics(pb.ModelStatisticsRequest(name=name, version=version), timeout=30)
        text = urllib.request.urlopen("http://127.0.0.1:%s%s" % (http_port, path), timeout=30).read()
        from_http = json_format.Parse(text, pb.ModelStatisticsResponse(), ignore_unknown_fields=False)
        out["stats"][scope] = {"grpc": as_dict(from_grpc), "same": from_grpc == from_http}
    out["stats_unknown_model"] = code_of(stub.ModelStatistics, pb.ModelStatisticsRequest(name="nope"))
    out["stats_unready_version"] = code_of(stub.ModelStatistics, pb.ModelStatisticsRequest(name=model, version="2"))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
