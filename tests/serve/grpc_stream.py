"""ModelStreamInfer for the serve tests: stubs generated at test time from apps/serve/grpc/kserve_v2.proto
with python3-grpc-tools, as grpc_client.py does.

usage: grpc_stream.py PROTO_DIR WORK_DIR GRPC_PORT MODEL PIXELS_FILE N CASE
CASE answers:   one stream of good requests (N images each, UINT8 raw) and bad ones (unknown model,
                bad version, bad shape, both raw and contents), then closed; prints each answer by
                id, the order they came in, the stream's end, and the unary ModelInfer answer of the
                same images.
CASE many:      64 requests written at once on one stream; prints the ids answered and the end.
CASE held-open: one request answered, then the stream kept open: prints "answered" and, when the
                stream ends (the server stops), its status code."""
import json
import queue
import struct
import sys

from grpc_tools import protoc


def main():
    proto_dir, work_dir, port, model, pixels_file, n, case = sys.argv[1:8]
    n = int(n)
    for proto in ("model_config.proto", "kserve_v2.proto"):
        if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + work_dir, "--grpc_python_out=" + work_dir,
                        proto_dir + "/" + proto]) != 0:
            sys.exit("protoc failed on " + proto)
    sys.path.insert(0, work_dir)
    import grpc
    import kserve_v2_pb2 as pb
    import kserve_v2_pb2_grpc as rpc

    stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:" + port))
    pixels = open(pixels_file, "rb").read()

    def request(rid, name=model, version="", shape=(n, 1, 28, 28), contents=False):
        req = pb.ModelInferRequest(model_name=name, model_version=version, id=rid)
        t = req.inputs.add(name="input", datatype="UINT8", shape=list(shape))
        req.raw_input_contents.append(pixels)
        if contents:
            t.contents.uint_contents.extend(pixels)
        return req

    def floats(response):
        return {o.name: list(struct.unpack("<%df" % (len(b) // 4), b))
                for o, b in zip(response.outputs, response.raw_output_contents)}

    def end_of(responses, on_answer):
        try:
            for r in responses:
                on_answer(r)
            return "OK"
        except grpc.RpcError as e:
            return e.code().name

    out = {}
    if case == "answers":
        requests = [request("good-0"), request("bad-model", name="nope"), request("good-1"),
                    request("bad-version", version="x"), request("bad-shape", shape=(n, 1, 28, 27)),
                    request("both", contents=True), request("good-2", version="1")]
        answers, order = {}, []

        def on_answer(r):
            order.append(r.infer_response.id)
            answers[r.infer_response.id] = ({"error": r.error_message} if r.error_message else
                                            {"model": r.infer_response.model_name, "outputs": floats(r.infer_response)})
        out["end"] = end_of(stub.ModelStreamInfer(iter(requests), timeout=60), on_answer)
        out["answers"], out["order"] = answers, order
        out["unary"] = floats(stub.ModelInfer(request("unary"), timeout=60))
    elif case == "many":
        ids = []
        out["end"] = end_of(stub.ModelStreamInfer(iter([request("r%d" % i) for i in range(64)]), timeout=120),
                            lambda r: ids.append(r.infer_response.id if not r.error_message else "error"))
        out["ids"] = ids
    elif case == "held-open":
        outgoing = queue.Queue()
        outgoing.put(request("first"))

        def requests():  # ends only when the server ends the stream (the client never closes its side)
            while True:
                item = outgoing.get()
                if item is None:
                    return
                yield item

        def on_answer(r):
            print("answered" if not r.error_message else "error " + r.error_message, flush=True)
        code = end_of(stub.ModelStreamInfer(requests(), timeout=120), on_answer)
        outgoing.put(None)
        print("end " + code, flush=True)
        return
    print(json.dumps(out))


if __name__ == "__main__":
    main()
