"""The gRPC half of conformance.py: every method of inference.GRPCInferenceService (and gRPC's
grpc.health.v1.Health), a valid call and misuse each, with the status codes Triton gives; stubs
generated at test time from apps/serve/grpc/*.proto with python3-grpc-tools."""
import sys

from grpc_tools import protoc

# A message gRPC cannot parse: field 1, length-delimited, 127 bytes long, of which 1 is sent.
MALFORMED = b"\x0a\x7f\x00"


def grpc_cases(proto_dir, work_dir, port, model, spare, cases):
    for proto in ("model_config.proto", "kserve_v2.proto", "health.proto"):
        if protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + work_dir, "--grpc_python_out=" + work_dir,
                        proto_dir + "/" + proto]) != 0:
            sys.exit("protoc failed on " + proto)
    sys.path.insert(0, work_dir)
    import grpc
    import health_pb2
    import health_pb2_grpc
    import kserve_v2_pb2 as pb
    import kserve_v2_pb2_grpc as rpc

    channel = grpc.insecure_channel("127.0.0.1:" + port)
    stub = rpc.GRPCInferenceServiceStub(channel)

    def run(call, request, check):
        try:
            response = call(request, timeout=60)
            if check is not None and not check(response):
                return "unexpected response", str(response)[:300]
            return "OK", ""
        except grpc.RpcError as e:
            return e.code().name, e.details()

    def case(method, kind, what, want, request, check=None):
        got, detail = run(getattr(stub, method), request, check)
        cases.add("grpc " + method, kind, what, want, got, detail)

    def malformed(method, want="INTERNAL", service="inference.GRPCInferenceService"):
        call = channel.unary_unary("/%s/%s" % (service, method), request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        got, detail = run(call, MALFORMED, None)
        cases.add("grpc " + method, "misuse", "a message that does not parse", want, got, detail)

    for method in ("ServerLive", "ServerReady", "ServerMetadata"):
        case(method, "valid", method, "OK", getattr(pb, method + "Request")())
        malformed(method)
    case("ServerMetadata", "valid", "extensions", "OK", pb.ServerMetadataRequest(),
         lambda r: r.name == "convoy" and {"trace", "logging", "statistics"} <= set(r.extensions))

    case("ModelReady", "valid", "ready", "OK", pb.ModelReadyRequest(name=model), lambda r: r.ready)
    case("ModelReady", "valid", "a version not ready", "OK", pb.ModelReadyRequest(name=model, version="9"),
         lambda r: not r.ready)
    case("ModelReady", "misuse", "unknown model", "NOT_FOUND", pb.ModelReadyRequest(name="nope"))
    case("ModelReady", "misuse", "bad version", "INVALID_ARGUMENT", pb.ModelReadyRequest(name=model, version="x"))
    for method in ("ModelMetadata", "ModelConfig", "ModelStatistics"):
        request = getattr(pb, method + "Request")
        case(method, "valid", "the newest version", "OK", request(name=model))
        case(method, "valid", "version 1", "OK", request(name=model, version="1"))
        case(method, "misuse", "unknown model", "NOT_FOUND", request(name="nope"))
        case(method, "misuse", "bad version", "INVALID_ARGUMENT", request(name=model, version="x"))
        case(method, "misuse", "a version not there", "NOT_FOUND", request(name=model, version="9"))
        malformed(method)
    case("ModelStatistics", "valid", "every model", "OK", pb.ModelStatisticsRequest(),
         lambda r: {s.name for s in r.model_stats} >= {model, spare})
    case("ModelStatistics", "misuse", "a version without a model", "INVALID_ARGUMENT",
         pb.ModelStatisticsRequest(version="1"))

    pixels = bytes([7]) * 784

    def infer(raw=True, **change):
        req = pb.ModelInferRequest(model_name=change.pop("model", model), model_version=change.pop("version", ""),
                                   id=change.pop("id", "g1"))
        t = req.inputs.add(name="input", datatype=change.pop("datatype", "UINT8"),
                           shape=change.pop("shape", [1, 1, 28, 28]))
        if raw:
            req.raw_input_contents.append(pixels)
        else:
            t.contents.uint_contents.extend(pixels)
        return req

    case("ModelInfer", "valid", "raw_input_contents", "OK", infer(), lambda r: r.id == "g1" and len(r.outputs) == 2)
    case("ModelInfer", "valid", "typed contents, version 1", "OK", infer(raw=False, version="1"))
    case("ModelInfer", "misuse", "unknown model", "NOT_FOUND", infer(model="nope"))
    case("ModelInfer", "misuse", "bad version", "INVALID_ARGUMENT", infer(version="x"))
    case("ModelInfer", "misuse", "wrong datatype", "INVALID_ARGUMENT", infer(datatype="INT64"))
    case("ModelInfer", "misuse", "wrong shape", "INVALID_ARGUMENT", infer(shape=[1, 1, 28, 27]))
    both = infer()
    both.inputs[0].contents.uint_contents.extend(pixels)
    case("ModelInfer", "misuse", "raw_input_contents and contents", "INVALID_ARGUMENT", both)
    two = infer()
    two.raw_input_contents.append(pixels)
    case("ModelInfer", "misuse", "two raw_input_contents for one input", "INVALID_ARGUMENT", two)
    timeout = infer()
    timeout.parameters["timeout"].string_param = "10"
    case("ModelInfer", "misuse", "timeout not an int64_param", "INVALID_ARGUMENT", timeout)
    classified = infer()
    classified.outputs.add(name="logits").parameters["classification"].int64_param = 0
    case("ModelInfer", "misuse", "classification 0", "INVALID_ARGUMENT", classified)
    malformed("ModelInfer")

    def stream(requests, want_errors):
        answers = []
        try:
            for r in stub.ModelStreamInfer(iter(requests), timeout=60):
                answers.append((r.infer_response.id, bool(r.error_message)))
        except grpc.RpcError as e:
            return e.code().name, e.details()
        got = sorted(answers)
        want = sorted((req.id, req.id in want_errors) for req in requests)
        return ("OK", "") if got == want else ("unexpected answers", str(got))

    got, detail = stream([infer(id="s1"), infer(id="s2", version="1")], set())
    cases.add("grpc ModelStreamInfer", "valid", "two requests, two answers, a clean end", "OK", got, detail)
    got, detail = stream([infer(id="s3"), infer(id="bad", model="nope"), infer(id="s4")], {"bad"})
    cases.add("grpc ModelStreamInfer", "misuse", "an unknown model: its error_message, the stream goes on", "OK",
              got, detail)
    # Bytes that do not parse are answered with an error_message like any bad request; the stream goes on.
    call = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                 request_serializer=lambda b: b, response_deserializer=pb.ModelStreamInferResponse.FromString)
    got, detail = run(lambda requests, timeout: list(call(requests, timeout=timeout)),
                      iter([MALFORMED, infer(id="s5").SerializeToString()]),
                      lambda answers: sorted((a.infer_response.id, bool(a.error_message)) for a in answers) ==
                      [("", True), ("s5", False)])
    cases.add("grpc ModelStreamInfer", "misuse", "a message that does not parse, then a good one", "OK", got, detail)

    case("RepositoryIndex", "valid", "every model", "OK", pb.RepositoryIndexRequest(),
         lambda r: {m.name for m in r.models} >= {model, spare})
    case("RepositoryIndex", "valid", "the ready ones", "OK", pb.RepositoryIndexRequest(ready=True))
    case("RepositoryIndex", "misuse", "a repository's name", "UNIMPLEMENTED",
         pb.RepositoryIndexRequest(repository_name="other"))
    case("RepositoryModelUnload", "valid", "unload the spare model", "OK", pb.RepositoryModelUnloadRequest(model_name=spare))
    case("RepositoryModelUnload", "misuse", "unknown model", "INVALID_ARGUMENT",
         pb.RepositoryModelUnloadRequest(model_name="nope"))
    unload = pb.RepositoryModelUnloadRequest(model_name=spare)
    unload.parameters["unload_dependents"].string_param = "yes"
    case("RepositoryModelUnload", "misuse", "unload_dependents not a bool", "INVALID_ARGUMENT", unload)
    case("RepositoryModelLoad", "valid", "load it again", "OK", pb.RepositoryModelLoadRequest(model_name=spare))
    case("RepositoryModelLoad", "misuse", "unknown model", "INVALID_ARGUMENT", pb.RepositoryModelLoadRequest(model_name="nope"))
    case("RepositoryModelLoad", "misuse", "a repository's name", "UNIMPLEMENTED",
         pb.RepositoryModelLoadRequest(repository_name="other", model_name=spare))
    load = pb.RepositoryModelLoadRequest(model_name=spare)
    load.parameters["config"].string_param = "{}"
    case("RepositoryModelLoad", "misuse", "a config override (not supported)", "UNIMPLEMENTED", load)

    def trace(model_name="", **settings):
        req = pb.TraceSettingRequest(model_name=model_name)
        for name, values in settings.items():
            req.settings[name].value.extend(values)
        return req

    case("TraceSetting", "valid", "the settings", "OK", trace(), lambda r: list(r.settings["trace_mode"].value) == ["triton"])
    case("TraceSetting", "valid", "a model's trace_rate", "OK", trace(model, trace_rate=["3"]),
         lambda r: list(r.settings["trace_rate"].value) == ["3"])
    case("TraceSetting", "valid", "cleared (no value)", "OK", trace(model, trace_rate=[]),
         lambda r: list(r.settings["trace_rate"].value) == ["1000"])
    case("TraceSetting", "misuse", "unknown model", "INVALID_ARGUMENT", trace("nope"))
    case("TraceSetting", "misuse", "trace_rate not a number", "INVALID_ARGUMENT", trace(trace_rate=["x"]))
    case("TraceSetting", "misuse", "two values for trace_count", "INVALID_ARGUMENT", trace(trace_count=["1", "2"]))
    case("TraceSetting", "misuse", "the trace file (not over the network)", "UNIMPLEMENTED", trace(trace_file=["/tmp/x"]))

    def log(**settings):
        req = pb.LogSettingsRequest()
        for name, value in settings.items():
            kind = "bool_param" if isinstance(value, bool) else "uint32_param" if isinstance(value, int) else "string_param"
            setattr(req.settings[name], kind, value)
        return req

    case("LogSettings", "valid", "the settings", "OK", log(), lambda r: r.settings["log_format"].string_param == "default")
    case("LogSettings", "valid", "log_verbose_level 0, log_info on", "OK", log(log_verbose_level=0, log_info=True),
         lambda r: r.settings["log_info"].bool_param)
    case("LogSettings", "misuse", "log_info as a string", "INVALID_ARGUMENT", log(log_info="true"))
    case("LogSettings", "misuse", "log_verbose_level as a bool", "INVALID_ARGUMENT", log(log_verbose_level=True))
    case("LogSettings", "misuse", "an unknown setting", "INVALID_ARGUMENT", log(log_colour="blue"))
    case("LogSettings", "misuse", "the log file (not over the network)", "UNIMPLEMENTED", log(log_file="/tmp/x"))

    from multiprocessing import shared_memory
    seg = shared_memory.SharedMemory(create=True, size=4096)
    try:
        key = "/" + seg.name
        register = pb.SystemSharedMemoryRegisterRequest(name="g1", key=key, offset=0, byte_size=4096)
        case("SystemSharedMemoryRegister", "valid", "a POSIX object", "OK", register)
        case("SystemSharedMemoryRegister", "misuse", "a name registered twice", "ALREADY_EXISTS", register)
        case("SystemSharedMemoryRegister", "misuse", "no such object", "INVALID_ARGUMENT",
             pb.SystemSharedMemoryRegisterRequest(name="g2", key="/convoy-conformance-none", byte_size=64))
        case("SystemSharedMemoryStatus", "valid", "every region", "OK", pb.SystemSharedMemoryStatusRequest(),
             lambda r: "g1" in r.regions)
        case("SystemSharedMemoryStatus", "misuse", "a region not registered", "NOT_FOUND",
             pb.SystemSharedMemoryStatusRequest(name="nope"))
        case("SystemSharedMemoryUnregister", "valid", "one region", "OK", pb.SystemSharedMemoryUnregisterRequest(name="g1"))
        malformed("SystemSharedMemoryUnregister")
    finally:
        seg.close()
        seg.unlink()
    case("CudaSharedMemoryStatus", "valid", "every region", "OK", pb.CudaSharedMemoryStatusRequest())
    case("CudaSharedMemoryStatus", "misuse", "a region not registered", "NOT_FOUND", pb.CudaSharedMemoryStatusRequest(name="nope"))
    case("CudaSharedMemoryRegister", "valid", "a handle (no GPU here, or not a real handle: refused, saying why)",
         "INVALID_ARGUMENT", pb.CudaSharedMemoryRegisterRequest(name="g1", raw_handle=b"\0" * 64, device_id=0, byte_size=64))
    malformed("CudaSharedMemoryRegister")
    case("CudaSharedMemoryUnregister", "valid", "every region", "OK", pb.CudaSharedMemoryUnregisterRequest())
    malformed("CudaSharedMemoryUnregister")

    health = health_pb2_grpc.HealthStub(channel)
    got, detail = run(health.Check, health_pb2.HealthCheckRequest(service=model),
                      lambda r: r.status == health_pb2.HealthCheckResponse.SERVING)
    cases.add("grpc Health.Check", "valid", "a model", "OK", got, detail)
    got, detail = run(health.Check, health_pb2.HealthCheckRequest(service="nope"), None)
    cases.add("grpc Health.Check", "misuse", "unknown service", "NOT_FOUND", got, detail)
