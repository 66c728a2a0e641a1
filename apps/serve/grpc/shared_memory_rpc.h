#pragma once
// Triton's shared-memory RPCs of GRPCInferenceService (SystemSharedMemory* and CudaSharedMemory*),
// and ModelInfer's outputs written to shared memory (its tensors' parameters are read by
// grpc_request.h's shared_memory_slice), over the SharedMemoryRegistry that the
// HTTP endpoints serve too (a region registered on one protocol is used from the other).
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "apps/serve/shared_memory.h"
#include "kserve_v2.grpc.pb.h"

namespace convoy::serve {

grpc::Status system_shm_status(const SharedMemoryRegistry& shm, const inference::SystemSharedMemoryStatusRequest& q,
                               inference::SystemSharedMemoryStatusResponse& r);
grpc::Status system_shm_register(SharedMemoryRegistry& shm, const inference::SystemSharedMemoryRegisterRequest& q);
grpc::Status system_shm_unregister(SharedMemoryRegistry& shm, const inference::SystemSharedMemoryUnregisterRequest& q);
grpc::Status cuda_shm_status(const SharedMemoryRegistry& shm, const inference::CudaSharedMemoryStatusRequest& q,
                             inference::CudaSharedMemoryStatusResponse& r);
grpc::Status cuda_shm_register(SharedMemoryRegistry& shm, const inference::CudaSharedMemoryRegisterRequest& q);
grpc::Status cuda_shm_unregister(SharedMemoryRegistry& shm, const inference::CudaSharedMemoryUnregisterRequest& q);

// Writes an output's `bytes` to its slice, and says so in the output's parameters (as HTTP's reply does).
void write_shared_memory_output(const SharedMemorySlice& shm, const std::string& what, const void* data, size_t bytes,
                                inference::ModelInferResponse::InferOutputTensor& out);

}  // namespace convoy::serve
