"""A grpc.health.v1.Health client for the serve tests, from Debian's python3-grpcio: stubs generated
at test time from apps/serve/grpc/health.proto (and the KServe protos, to unload and load a model)
with python3-grpc-tools.

usage: grpc_health.py PROTO_DIR WORK_DIR PORT checks MODEL BROKEN_MODEL
         Checks and Watches, with MODEL unloaded and loaded again in between (--model-control
         explicit); prints one JSON object.
       grpc_health.py PROTO_DIR WORK_DIR PORT watch-server
         Watches service "" and prints each status as a line as it comes, then the call's end."""
import json
import sys

from grpc_tools import protoc


def status_name(pb, status):
    return pb.HealthCheckResponse.ServingStatus.Name(status)


def checks(channel, pb, rpc, model, broken):
    import grpc
    import kserve_v2_pb2 as kpb
    import kserve_v2_pb2_grpc as krpc

    health = rpc.HealthStub(channel)
    kserve = krpc.GRPCInferenceServiceStub(channel)

    def check(service):
        try:
            return status_name(pb, health.Check(pb.HealthCheckRequest(service=service), timeout=30).status)
        except grpc.RpcError as e:
            return e.code().name

    out = {"check": {s: check(s) for s in ("", "inference.GRPCInferenceService", model, broken, "nope")}}
    unknown = health.Watch(pb.HealthCheckRequest(service="nope"), timeout=30)
    out["watch_unknown"] = status_name(pb, next(unknown).status)
    unknown.cancel()

    # A Watch of the model sees it go when unloaded and come back when loaded.
    watch = health.Watch(pb.HealthCheckRequest(service=model), timeout=60)
    seen = [status_name(pb, next(watch).status)]
    kserve.RepositoryModelUnload(kpb.RepositoryModelUnloadRequest(model_name=model), timeout=30)
    seen.append(status_name(pb, next(watch).status))
    out["check_unloaded"] = check(model)
    kserve.RepositoryModelLoad(kpb.RepositoryModelLoadRequest(model_name=model), timeout=30)
    seen.append(status_name(pb, next(watch).status))
    watch.cancel()
    out["watch_model"] = seen
    out["check_reloaded"] = check(model)
    print(json.dumps(out))


def watch_server(channel, pb, rpc):
    import grpc

    health = rpc.HealthStub(channel)
    try:
        for r in health.Watch(pb.HealthCheckRequest(service=""), timeout=60):
            print(status_name(pb, r.status), flush=True)
        print("end OK", flush=True)
    except grpc.RpcError as e:
        print("end " + e.code().name, flush=True)


def main():
    proto_dir, work_dir, port, mode = sys.argv[1:5]
    for proto in ("health.proto", "model_config.proto", "kserve_v2.proto"):  # kserve_v2 imports model_config
        if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + work_dir, "--grpc_python_out=" + work_dir,
                        proto_dir + "/" + proto]) != 0:
            sys.exit("protoc failed on " + proto)
    sys.path.insert(0, work_dir)
    import grpc
    import health_pb2 as pb
    import health_pb2_grpc as rpc

    channel = grpc.insecure_channel("127.0.0.1:" + port)
    if mode == "checks":
        checks(channel, pb, rpc, sys.argv[5], sys.argv[6])
    elif mode == "watch-server":
        watch_server(channel, pb, rpc)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
