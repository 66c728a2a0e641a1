#pragma once
// Checks across datasets, for what one dataset alone cannot know.
#include "datasets/dataset.h"

namespace convoy {

// Training and evaluation read one label space: the same class names in the same order (image
// folders whose val/ lacks or adds a class would otherwise shift every label after it). Throws
// an InputError naming both datasets and the first class that differs.
void check_same_classes(const Dataset& train, const Dataset& test);

}  // namespace convoy
