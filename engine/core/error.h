#pragma once
// Convoy's exception types: the CLI catches convoy::Error, prints one line, exits non-zero.
#include <stdexcept>
#include <string>

namespace convoy {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A user's input is wrong: config, model, data file, image, command-line argument.
class InputError : public Error {
 public:
  using Error::Error;
};

// The requested device or library cannot be used on this machine.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// The device has no memory left for an allocation; the training loop adds the batch size and
// what to try.
class OutOfMemoryError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// Training diverged: a non-finite loss, or weights that are no longer finite (a learning
// rate too high, bad data). Not a bug in Convoy; the CLI reports it like bad input (exit 1).
class NumericError : public Error {
 public:
  using Error::Error;
};

// An internal invariant failed: a bug in Convoy, not the user's fault.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace convoy

#define CONVOY_STRINGIFY_(x) #x
#define CONVOY_STRINGIFY(x) CONVOY_STRINGIFY_(x)
// Internal invariant check: throws InternalError with the condition and file:line.
#define CONVOY_CHECK(cond, msg)                                                        \
  do {                                                                                 \
    if (!(cond))                                                                       \
      throw ::convoy::InternalError(std::string(msg) + " (" #cond ") at " __FILE__ \
                                    ":" CONVOY_STRINGIFY(__LINE__));                   \
  } while (0)
