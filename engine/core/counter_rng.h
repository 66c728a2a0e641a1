#pragma once
// A counter-based random number generator: the value for (seed, counter) is a pure
// function, so the CPU and the GPU draw identical dropout masks and augmentations,
// and a backward pass can regenerate a forward pass's mask instead of storing it.
#include <cstdint>

#if defined(__CUDACC__)
#define CONVOY_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CONVOY_HOST_DEVICE inline
#endif

namespace convoy {

// SplitMix64 finalizer over seed and counter: statistically strong, one multiply chain.
CONVOY_HOST_DEVICE uint64_t counter_hash(uint64_t seed, uint64_t counter) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (counter + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 random bits.
CONVOY_HOST_DEVICE float counter_uniform(uint64_t seed, uint64_t counter) {
  return static_cast<float>(counter_hash(seed, counter) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace convoy
