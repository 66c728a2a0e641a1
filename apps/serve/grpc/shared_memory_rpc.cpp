#include "apps/serve/grpc/shared_memory_rpc.h"

#include <functional>

#include "engine/core/error.h"

namespace convoy::serve {

namespace {

using grpc::Status;
using grpc::StatusCode;

// Runs a registry call, its errors as gRPC codes: a name taken is ALREADY_EXISTS, a status of a
// name not registered NOT_FOUND, anything else the request's fault (INVALID_ARGUMENT).
Status call(const std::function<void()>& work) {
  try {
    work();
  } catch (const RegionExists& e) {
    return Status(StatusCode::ALREADY_EXISTS, e.what());
  } catch (const RequestError& e) {
    return Status(e.status() == 404 ? StatusCode::NOT_FOUND : StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const Error& e) {  // a CUDA call that failed (DeviceError)
    return Status(StatusCode::INVALID_ARGUMENT, e.what());
  }
  return Status::OK;
}

}  // namespace

Status system_shm_status(const SharedMemoryRegistry& shm, const inference::SystemSharedMemoryStatusRequest& q,
                         inference::SystemSharedMemoryStatusResponse& r) {
  return call([&] {
    for (const SystemRegionStatus& s : shm.system_status(q.name())) {
      auto& region = (*r.mutable_regions())[s.name];
      region.set_name(s.name);
      region.set_key(s.key);
      region.set_offset(s.offset);
      region.set_byte_size(s.byte_size);
    }
  });
}

Status system_shm_register(SharedMemoryRegistry& shm, const inference::SystemSharedMemoryRegisterRequest& q) {
  return call([&] { shm.register_system(q.name(), q.key(), q.offset(), q.byte_size()); });
}

Status system_shm_unregister(SharedMemoryRegistry& shm, const inference::SystemSharedMemoryUnregisterRequest& q) {
  return call([&] { shm.unregister_system(q.name()); });
}

Status cuda_shm_status(const SharedMemoryRegistry& shm, const inference::CudaSharedMemoryStatusRequest& q,
                       inference::CudaSharedMemoryStatusResponse& r) {
  return call([&] {
    for (const CudaRegionStatus& s : shm.cuda_status(q.name())) {
      auto& region = (*r.mutable_regions())[s.name];
      region.set_name(s.name);
      region.set_device_id(static_cast<uint64_t>(s.device_id));
      region.set_byte_size(s.byte_size);
    }
  });
}

Status cuda_shm_register(SharedMemoryRegistry& shm, const inference::CudaSharedMemoryRegisterRequest& q) {
  return call([&] { shm.register_cuda(q.name(), q.raw_handle(), q.device_id(), q.byte_size()); });
}

Status cuda_shm_unregister(SharedMemoryRegistry& shm, const inference::CudaSharedMemoryUnregisterRequest& q) {
  return call([&] { shm.unregister_cuda(q.name()); });
}

void write_shared_memory_output(const SharedMemorySlice& shm, const std::string& what, const void* data, size_t bytes,
                                inference::ModelInferResponse::InferOutputTensor& out) {
  shm.write(what, data, bytes);
  (*out.mutable_parameters())["shared_memory_region"].set_string_param(shm.region);
  (*out.mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(bytes));
}

}  // namespace convoy::serve
