// convoy_shm_bench over gRPC: GRPCInferenceService's shared-memory RPCs and ModelInfer with the
// shared-memory parameters, from stubs of apps/serve/grpc/kserve_v2.proto.
#include <grpcpp/grpcpp.h>

#include <stdexcept>

#include "benchmarks/serve/shm_bench/shm_bench.h"
#include "kserve_v2.grpc.pb.h"

namespace convoy::shm_bench {

namespace {

void check(const grpc::Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.error_message());
}

class GrpcConnection final : public Connection {
 public:
  // A channel of its own per connection: one HTTP/2 connection each, as N clients would have.
  explicit GrpcConnection(int port) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
  }
  void register_region(const std::string& name, const ClientMemory& memory) override {
    grpc::ClientContext context;
    if (memory.device() >= 0) {
      inference::CudaSharedMemoryRegisterRequest q;
      inference::CudaSharedMemoryRegisterResponse r;
      q.set_name(name);
      q.set_raw_handle(memory.ipc_handle());
      q.set_device_id(memory.device());
      q.set_byte_size(memory.size());
      return check(stub_->CudaSharedMemoryRegister(&context, q, &r), "register " + name);
    }
    inference::SystemSharedMemoryRegisterRequest q;
    inference::SystemSharedMemoryRegisterResponse r;
    q.set_name(name);
    q.set_key(memory.key());
    q.set_byte_size(memory.size());
    check(stub_->SystemSharedMemoryRegister(&context, q, &r), "register " + name);
  }
  void unregister_region(const std::string& name, const ClientMemory& memory) override {
    grpc::ClientContext context;
    if (memory.device() >= 0) {
      inference::CudaSharedMemoryUnregisterRequest q;
      inference::CudaSharedMemoryUnregisterResponse r;
      q.set_name(name);
      stub_->CudaSharedMemoryUnregister(&context, q, &r);
      return;
    }
    inference::SystemSharedMemoryUnregisterRequest q;
    inference::SystemSharedMemoryUnregisterResponse r;
    q.set_name(name);
    stub_->SystemSharedMemoryUnregister(&context, q, &r);
  }
  std::string infer(const InferCall& c) override {
    if (request_.inputs_size() == 0) {
      request_.set_model_name(c.model);
      auto* in = request_.add_inputs();
      in->set_name("input");
      in->set_datatype("UINT8");
      for (int64_t d : {c.images, c.chw[0], c.chw[1], c.chw[2]}) in->add_shape(d);
      (*in->mutable_parameters())["shared_memory_region"].set_string_param(c.in);
      (*in->mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(c.in_bytes));
      auto* out = request_.add_outputs();
      out->set_name("probabilities");
      (*out->mutable_parameters())["shared_memory_region"].set_string_param(c.out);
      (*out->mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(c.out_bytes));
    }
    grpc::ClientContext context;
    inference::ModelInferResponse r;
    const grpc::Status s = stub_->ModelInfer(&context, request_, &r);
    return s.ok() ? "" : std::to_string(s.error_code()) + " " + s.error_message();
  }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  inference::ModelInferRequest request_;
};

}  // namespace

std::unique_ptr<Connection> connect_grpc(int port) { return std::make_unique<GrpcConnection>(port); }

}  // namespace convoy::shm_bench
