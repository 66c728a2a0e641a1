#pragma once
// GPU kernel times from CUPTI's Activity API: the CUDA backend's KernelTrace. libcupti is opened
// at run time (dlopen), not linked, so that a runtime image without it loses the kernel table only.
#include <memory>
#include <string>

#include "engine/backends/backend.h"

namespace convoy::cuda {

// Empty when libcupti can be loaded and is this build's CUDA major version, else why not.
std::string cupti_unavailable_reason();

// Starts a trace of every kernel the process launches (CUPTI is process-wide: all devices and
// streams); stop() first waits for `device`. nullptr, with the reason in `why_not`, where libcupti
// is unusable, another trace is on or CUPTI refuses; never throws.
std::unique_ptr<KernelTrace> start_kernel_trace(int device, std::string& why_not);

// A kernel's name for a table line: demangled, without the return type, the parameter list and
// anonymous namespaces; nested template lists and then the middle cut where it stays too long.
// C names (cuDNN's, cuBLAS's) are kept as they are, cut only where too long.
std::string short_kernel_name(const char* name);

}  // namespace convoy::cuda
