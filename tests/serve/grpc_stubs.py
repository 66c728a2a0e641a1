"""What the serve tests' gRPC clients share: generate(PROTO_DIR, WORK_DIR) writes Python stubs of
apps/serve/grpc's .proto files to WORK_DIR with python3-grpc-tools and puts WORK_DIR on sys.path, so
that `import kserve_v2_pb2` follows; code_of(CALL, REQUEST) is "OK" or the error's "CODE: details"."""
import sys

import grpc
from grpc_tools import protoc


def generate(proto_dir, work_dir, protos=("model_config.proto", "kserve_v2.proto")):
    for proto in protos:
        if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + work_dir, "--grpc_python_out=" + work_dir,
                        proto_dir + "/" + proto]) != 0:
            sys.exit("protoc failed on " + proto)
    sys.path.insert(0, work_dir)


def code_of(call, request):
    try:
        call(request, timeout=30)
        return "OK"
    except grpc.RpcError as e:
        return e.code().name + ": " + e.details()
