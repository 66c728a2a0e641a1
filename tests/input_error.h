#pragma once
// Shared by the file-reader tests: the message of the InputError a call throws.
#include <gtest/gtest.h>

#include <string>

#include "engine/core/error.h"

namespace convoy::testing {

// The InputError message of `call()`; fails the test (naming `what`) when nothing is thrown.
template <class Call>
std::string input_error_of(Call&& call, const std::string& what) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << what << " did not throw";
  return {};
}

}  // namespace convoy::testing

// The message names the file and contains the fragment.
#define EXPECT_MESSAGE(message, path, fragment)                   \
  do {                                                            \
    const std::string m_ = (message);                             \
    EXPECT_NE(m_.find((path).string()), std::string::npos) << m_; \
    EXPECT_NE(m_.find(fragment), std::string::npos) << m_;        \
  } while (0)
