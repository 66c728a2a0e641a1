#pragma once
// Shared by the hostile-input tests (test_reliability_inputs.cpp, test_reliability_cli.cpp).
#include <gtest/gtest.h>

#include <string>

namespace convoy::testing {

// "message contains fragment", with the message in the failure output.
#define EXPECT_HAS(message, fragment)                                     \
  do {                                                                    \
    const std::string m_ = (message);                                     \
    EXPECT_NE(m_.find(fragment), std::string::npos) << "in: " << m_;      \
  } while (0)

// A small model: conv, batch norm, linear. Its YAML is what the checkpoints below carry.
inline const std::string kSmallModel =
    "name: small\n"
    "input: [1, 8, 8]\n"
    "layers:\n"
    "  - {name: conv, type: conv2d, out_channels: 2, kernel: 3}\n"
    "  - {name: bn, type: batchnorm2d}\n"
    "  - {type: flatten}\n"
    "  - {name: fc, type: linear, out_features: 2}\n";

}  // namespace convoy::testing
