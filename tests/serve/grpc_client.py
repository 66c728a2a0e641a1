"""A KServe v2 gRPC client for the serve tests, from Debian's python3-grpcio: stubs generated
at test time from apps/serve/grpc/kserve_v2.proto (and model_config.proto) with python3-grpc-tools.

usage: grpc_client.py PROTO_DIR WORK_DIR PORT PIXELS_FILE N
Prints one JSON object with what each call returned."""
import json
import struct
import sys

from grpc_tools import protoc


def main():
    proto_dir, work_dir, port, pixels_file, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    for proto in ("model_config.proto", "kserve_v2.proto"):  # the service imports the model config
        if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + work_dir, "--grpc_python_out=" + work_dir,
                        proto_dir + "/" + proto]) != 0:
            sys.exit("protoc failed on " + proto)
    sys.path.insert(0, work_dir)
    import grpc
    import kserve_v2_pb2 as pb
    import kserve_v2_pb2_grpc as rpc

    stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:" + port))
    out = {}
    out["live"] = stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live
    out["ready"] = stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready
    out["server"] = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30).name
    meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="fm"), timeout=30)
    out["input_shape"] = list(meta.inputs[0].shape)
    out["model_ready"] = stub.ModelReady(pb.ModelReadyRequest(name="fm", version="1"), timeout=30).ready
    out["index"] = [[m.name, m.version, m.state] for m in stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=30).models]

    pixels = open(pixels_file, "rb").read()

    def request(raw):
        req = pb.ModelInferRequest(model_name="fm", id="g1")
        t = req.inputs.add(name="input", datatype="UINT8", shape=[n, 1, 28, 28])
        if raw:
            req.raw_input_contents.append(pixels)
        else:
            t.contents.uint_contents.extend(pixels)
        return req

    for name, raw in (("raw", True), ("contents", False)):
        r = stub.ModelInfer(request(raw), timeout=30)
        out[name] = {"id": r.id, "version": r.model_version,
                     "outputs": {o.name: list(struct.unpack("<%df" % (len(b) // 4), b))
                                 for o, b in zip(r.outputs, r.raw_output_contents)}}

    def code_of(req):
        try:
            stub.ModelInfer(req, timeout=30)
            return "OK"
        except grpc.RpcError as e:
            return e.code().name + ": " + e.details()

    out["unknown_model"] = code_of(pb.ModelInferRequest(model_name="nope"))
    both = request(True)  # raw_input_contents and contents for the same input
    both.inputs[0].contents.uint_contents.extend(pixels)
    out["raw_and_contents"] = code_of(both)
    try:
        stub.ModelReady(pb.ModelReadyRequest(name="nope"), timeout=30)
        out["unknown_model_ready"] = "OK"
    except grpc.RpcError as e:
        out["unknown_model_ready"] = e.code().name
    bad = request(True)
    bad.inputs[0].shape[3] = 27
    out["bad_shape"] = code_of(bad)
    short = request(True)
    short.raw_input_contents[0] = pixels[:100]
    out["short_raw"] = code_of(short)
    # parameters["timeout"], microseconds: negative is refused, as over HTTP; 2^63 - 1 is cut to
    # the one-hour maximum rather than overflowing the clock into an instant DEADLINE_EXCEEDED.
    for name, timeout in (("timeout_negative", -1), ("timeout_max", 2**63 - 1)):
        req = request(True)
        req.parameters["timeout"].int64_param = timeout
        out[name] = code_of(req)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
