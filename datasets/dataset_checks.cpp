#include "datasets/dataset_checks.h"

#include <algorithm>

#include "engine/core/error.h"

namespace convoy {

void check_same_classes(const Dataset& train, const Dataset& test) {
  const auto& a = train.class_names();
  const auto& b = test.class_names();
  if (a == b) return;
  const std::string both = train.name() + " and " + test.name();
  const size_t common = std::min(a.size(), b.size());
  const auto diff = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(common), b.begin());
  const size_t i = static_cast<size_t>(diff.first - a.begin());
  std::string message = both + " have different classes (" + std::to_string(a.size()) + " and " +
                        std::to_string(b.size()) + "): ";
  if (i < common)
    message += "class " + std::to_string(i) + " is '" + a[i] + "' in " + train.name() + " but '" + b[i] +
               "' in " + test.name();
  else if (a.size() > b.size())
    message += "class " + std::to_string(i) + " '" + a[i] + "' of " + train.name() + " is missing from " +
               test.name();
  else
    message += "class " + std::to_string(i) + " '" + b[i] + "' of " + test.name() + " is missing from " +
               train.name();
  throw InputError(message + "; both splits need the same class names in the same order");
}

}  // namespace convoy
