#include "tests/ops/test_backends.h"

#include <cstdlib>
#include <map>

namespace convoy::optest {

namespace {

bool conv_ops(OpKind op) {
  return op == OpKind::conv2d_forward || op == OpKind::conv2d_backward_data || op == OpKind::conv2d_backward_weights;
}

bool batchnorm_ops(OpKind op) {
  return op == OpKind::batchnorm_forward_train || op == OpKind::batchnorm_forward_eval ||
         op == OpKind::batchnorm_backward;
}

}  // namespace

const std::vector<TestBackend>& cpu_test_backends() {
  static const std::vector<TestBackend> list{{"cpu", "oneDNN and OpenMP loops", false, {}, nullptr}};
  return list;
}

const std::vector<TestBackend>& cuda_test_backends() {
  static const std::vector<TestBackend> list{
      {"cuda", "cuDNN (algorithms timed per shape), cuBLAS, Convoy's kernels", true, {}, nullptr},
      {"cuda_heuristics", "cuDNN's heuristics' algorithm pick (cudnn_benchmark: false)", true,
       BackendOptions{.benchmark = false}, conv_ops},
      {"cuda_bn_kernels", "batch norm by Convoy's kernels instead of cuDNN (CONVOY_CUDA_BN_KERNELS=1)", true,
       BackendOptions{.cuda = {.bn_kernels = true}}, batchnorm_ops},
  };
  return list;
}

const TestBackend& cuda_deterministic_backend() {
  static const TestBackend b{"cuda_deterministic", "cuDNN's deterministic algorithms", true,
                             BackendOptions{.deterministic = true}, nullptr};
  return b;
}

std::string unavailable_reason(const TestBackend& b) { return b.cuda ? cuda_unavailable_reason() : ""; }

Backend& shared_backend(const TestBackend& b) {
  static std::map<std::string, std::unique_ptr<Backend>> made;
  std::unique_ptr<Backend>& slot = made[b.name];
  if (!slot) {
    slot = b.cuda ? make_cuda_backend(0, b.options) : make_cpu_backend(b.options);
  }
  return *slot;
}

Backend& shared_cpu_backend() { return shared_backend(cpu_test_backends().front()); }

}  // namespace convoy::optest
