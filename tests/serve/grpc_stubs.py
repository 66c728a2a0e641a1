"""Python stubs of apps/serve/grpc's .proto files, generated at test time with python3-grpc-tools
for the serve tests' gRPC clients: generate(PROTO_DIR, WORK_DIR) writes them to WORK_DIR and puts it
on sys.path, so that `import kserve_v2_pb2` follows."""
import sys

from grpc_tools import protoc


def generate(proto_dir, work_dir, protos=("model_config.proto", "kserve_v2.proto")):
    for proto in protos:
        if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + work_dir, "--grpc_python_out=" + work_dir,
                        proto_dir + "/" + proto]) != 0:
            sys.exit("protoc failed on " + proto)
    sys.path.insert(0, work_dir)
