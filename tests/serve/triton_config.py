"""Reads a served model's configuration as a Triton client would, into Triton's ModelConfig message
(apps/serve/grpc/model_config.proto, generated at test time with python3-grpc-tools): over HTTP,
GET /v2/models/MODEL/config through protobuf's json_format.Parse with ignore_unknown_fields=False
(a field the message lacks fails); over gRPC (when GRPC_PORT is given), ModelConfig's
ModelConfigResponse.config.

usage: triton_config.py PROTO_DIR WORK_DIR HTTP_PORT MODEL [GRPC_PORT]
Prints one JSON object: each protocol's config as json_format.MessageToDict writes it (proto field
names; 64-bit integers as strings), whether the two messages are equal, and whether the strict
parse refuses an unknown field (so that it is known to be strict)."""
import json
import sys
import urllib.request

from grpc_tools import protoc


def main():
    proto_dir, work_dir, http_port, model = sys.argv[1:5]
    grpc_port = sys.argv[5] if len(sys.argv) > 5 else None
    protos = ["model_config.proto"] + (["kserve_v2.proto"] if grpc_port else [])
    for proto in protos:
        if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + work_dir, "--grpc_python_out=" + work_dir,
                        proto_dir + "/" + proto]) != 0:
            sys.exit("protoc failed on " + proto)
    sys.path.insert(0, work_dir)
    from google.protobuf import json_format
    import model_config_pb2 as mc

    def as_dict(message):
        return json_format.MessageToDict(message, preserving_proto_field_name=True)

    out = {}
    text = urllib.request.urlopen("http://127.0.0.1:%s/v2/models/%s/config" % (http_port, model), timeout=30).read()
    from_http = json_format.Parse(text, mc.ModelConfig(), ignore_unknown_fields=False)
    out["http"] = as_dict(from_http)
    try:
        json_format.Parse('{"name": "x", "not_a_field": 1}', mc.ModelConfig(), ignore_unknown_fields=False)
        out["strict"] = False
    except json_format.ParseError:
        out["strict"] = True
    if grpc_port:
        import grpc
        import kserve_v2_pb2 as pb
        import kserve_v2_pb2_grpc as rpc
        stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:" + grpc_port))
        from_grpc = stub.ModelConfig(pb.ModelConfigRequest(name=model), timeout=30).config
        out["grpc"] = as_dict(from_grpc)
        out["same"] = from_grpc == from_http
        try:
            stub.ModelConfig(pb.ModelConfigRequest(name="nope"), timeout=30)
            out["unknown_model"] = "OK"
        except grpc.RpcError as e:
            out["unknown_model"] = e.code().name
    print(json.dumps(out))


if __name__ == "__main__":
    main()
