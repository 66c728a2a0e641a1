#pragma once
// convoy_shm_bench: a client on the server's host that passes its inputs (and takes its outputs)
// through Triton's shared-memory extensions, system shared memory or (--cuda) CUDA shared memory,
// at batch B with N requests in flight, over HTTP or gRPC. The pieces behind the tool's main
// (main.cpp): where the client's bytes live, and how it talks to the server.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace convoy::shm_bench {

// Memory of the client's that the server can map: a POSIX shared-memory object, or device memory
// with its cudaIpcMemHandle_t.
class ClientMemory {
 public:
  virtual ~ClientMemory() = default;
  virtual size_t size() const = 0;
  virtual void write(size_t offset, const void* data, size_t bytes) = 0;
  virtual void read(size_t offset, void* data, size_t bytes) const = 0;
  // system: the shm_open key; CUDA: empty.
  virtual std::string key() const = 0;
  // CUDA: the device and the handle's bytes; -1 and empty for system shared memory.
  virtual int device() const = 0;
  virtual std::string ipc_handle() const = 0;
};

std::unique_ptr<ClientMemory> make_system_memory(const std::string& key, size_t bytes);
// Device memory on GPU `device` (cuda_memory.cpp; a build without CUDA throws saying so).
std::unique_ptr<ClientMemory> make_cuda_memory(int device, size_t bytes);

// One inference: `images` UINT8 images of `chw` (C, H, W) from the start of region `in`,
// probabilities (images x classes f32) to the start of region `out`.
struct InferCall {
  std::string model;
  int64_t images = 1;
  int64_t chw[3] = {0, 0, 0};
  std::string in, out;
  size_t in_bytes = 0, out_bytes = 0;
};

// One connection to the server (each request thread has its own).
class Connection {
 public:
  virtual ~Connection() = default;
  // Registers `memory` as region `name`: system or CUDA, as the memory is.
  virtual void register_region(const std::string& name, const ClientMemory& memory) = 0;
  virtual void unregister_region(const std::string& name, const ClientMemory& memory) = 0;
  // Runs `call`; "" on success, else the server's error.
  virtual std::string infer(const InferCall& call) = 0;
};

std::unique_ptr<Connection> connect_http(int port);
// gRPC (grpc_connection.cpp; a build without gRPC throws saying so).
std::unique_ptr<Connection> connect_grpc(int port);

std::string base64(const std::string& bytes);

}  // namespace convoy::shm_bench
