#pragma once
// The one thread that does the CPU work of every model `convoy serve` holds: building their
// inference plans, running their batches and freeing them. OpenMP (libgomp) keeps a team of
// threads for each thread that starts parallel work; with a team per model instance there are
// more OpenMP threads than CPUs, and then libgomp's threads sleep between parallel regions
// instead of spinning (two LeNet-5 models on 2 cores: a batch-1 pass 470 us instead of 52 us,
// benchmarks/RESULTS.md). On one thread the models' passes take turns on one team that spans
// the cores, which they would share anyway.
#include <functional>

namespace convoy::serve {

// Runs `work` on the CPU thread after what was queued before it and returns when it is done,
// rethrowing what it threw; on the CPU thread itself it runs `work` at once.
void run_on_cpu_thread(const std::function<void()>& work);

}  // namespace convoy::serve
