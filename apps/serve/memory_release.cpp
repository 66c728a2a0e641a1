#include "apps/serve/memory_release.h"

#include <malloc.h>

#include "engine/core/tensor.h"

namespace convoy::serve {

// The engine's CPU allocator keeps freed blocks below 32 MiB in the heap and shrinks the heap
// only past 1 GiB free (engine/core/tensor.cpp: training steps fault their pages in again
// otherwise). In convoy serve a large request body or its inflation, grown in steps, then stayed
// in RSS: on the 2-core VM, idle at 192 MB, a 20 MiB body left 213 MB, 64 MiB sent chunked 257 MB,
// 64 MiB of gzip 225 MB; malloc_trim(0) does not shrink the top of the I/O threads' arenas, only the main arena's. With
// 16 MiB, each arena shrinks as such memory is freed (those three end within 1% of idle; at most
// just under 16 MiB stays per arena). What it costs: a batch whose freed buffers leave 16 MiB at
// an arena's top faults them in again next time (~1 ms per MiB on this VM; ResNet-50's FP32 input
// at batch 32, 19 MB, against seconds of compute), where the engine's setting kept them.
void configure_serving_heap() {
  (void)cpu_allocator();  // its own settings first, which this overrides
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kServeTrimThreshold));
}

// Free chunks inside an arena (not at its top) stay in RSS whatever the threshold: malloc_trim
// hands their pages back (after large requests only, whose reading took far longer; on the
// thread that frees the body, a worker's or an I/O thread's: HttpRequest::release).
void release_memory_after_request(uint64_t body_bytes) {
  if (body_bytes >= kReleaseAfterBytes) malloc_trim(0);
}

}  // namespace convoy::serve
