"""Triton's shared-memory RPCs and ModelInfer's shared-memory parameters over gRPC, for the serve
tests: stubs generated at test time from apps/serve/grpc/kserve_v2.proto (grpc_stubs.py).

usage: grpc_shared_memory.py PROTO_DIR WORK_DIR HTTP_PORT GRPC_PORT MODEL KEY N IN_OFFSET OUT_OFFSET
KEY is a POSIX shared-memory object holding N UINT8 images (N x 1 x 28 x 28) at IN_OFFSET. Registers
all of it as region "g" (seen by HTTP's status too), runs ModelInfer with the input there, the
probabilities written to OUT_OFFSET and the logits returned in raw_output_contents; then the
misuses, each as "CODE: details"; then unregisters "g". Prints one JSON object."""
import json
import os
import struct
import sys
import urllib.request

from grpc_stubs import code_of, generate


def main():
    proto_dir, work_dir, http_port, grpc_port, model, key, n, in_offset, out_offset = sys.argv[1:10]
    n, in_offset, out_offset = int(n), int(in_offset), int(out_offset)
    generate(proto_dir, work_dir)
    import grpc
    import kserve_v2_pb2 as pb
    import kserve_v2_pb2_grpc as rpc

    stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:" + grpc_port))
    size = os.path.getsize("/dev/shm/" + key.lstrip("/"))
    out = {}

    def shm(params, region, offset, byte_size):
        params["shared_memory_region"].string_param = region
        params["shared_memory_offset"].int64_param = offset
        params["shared_memory_byte_size"].int64_param = byte_size

    def request(region="g", offset=in_offset, byte_size=n * 784, out_bytes=n * 40, raw=False):
        req = pb.ModelInferRequest(model_name=model)
        i = req.inputs.add(name="input", datatype="UINT8", shape=[n, 1, 28, 28])
        shm(i.parameters, region, offset, byte_size)
        if raw:
            req.raw_input_contents.append(bytes(n * 784))
        shm(req.outputs.add(name="probabilities").parameters, "g", out_offset, out_bytes)
        req.outputs.add(name="logits")
        return req

    register = pb.SystemSharedMemoryRegisterRequest(name="g", key=key, offset=0, byte_size=size)
    stub.SystemSharedMemoryRegister(register, timeout=30)
    status = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=30)
    out["status"] = {name: {"key": s.key, "offset": s.offset, "byte_size": s.byte_size} for name, s in status.regions.items()}
    http = json.load(urllib.request.urlopen("http://127.0.0.1:%s/v2/systemsharedmemory/status" % http_port, timeout=30))
    out["status_http_region"] = [s["name"] for s in http]
    out["duplicate"] = code_of(stub.SystemSharedMemoryRegister, register)

    r = stub.ModelInfer(request(), timeout=30)
    raw = dict(zip((o.name for o in r.outputs), r.raw_output_contents))
    out["probabilities_in_shm"] = raw["probabilities"].decode()
    out["logits_raw"] = list(struct.unpack("<%df" % (len(raw["logits"]) // 4), raw["logits"]))
    out["unknown_region"] = code_of(stub.ModelInfer, request(region="nope"))
    out["past_end"] = code_of(stub.ModelInfer, request(offset=size - 10))
    out["size_mismatch"] = code_of(stub.ModelInfer, request(byte_size=n * 784 - 1))
    out["shm_and_raw"] = code_of(stub.ModelInfer, request(raw=True))
    out["output_too_small"] = code_of(stub.ModelInfer, request(out_bytes=n * 40 - 1))
    out["cuda_status"] = {name: s.byte_size for name, s in stub.CudaSharedMemoryStatus(
        pb.CudaSharedMemoryStatusRequest(), timeout=30).regions.items()}
    out["cuda_register"] = code_of(stub.CudaSharedMemoryRegister, pb.CudaSharedMemoryRegisterRequest(
        name="c", raw_handle=bytes(64), device_id=0, byte_size=16))
    stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="g"), timeout=30)
    out["status_after_unregister"] = code_of(stub.SystemSharedMemoryStatus, pb.SystemSharedMemoryStatusRequest(name="g"))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
