#pragma once
// The dataset kinds a run config may name (dataset.kind): the one list that the config's
// validation (run_config.cpp) and the dataset factory (load_dataset, datasets/dataset.cpp) read.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace convoy {

enum class DatasetKind { fashion_mnist, mnist, cifar10, cifar100, image_folder, csv, synthetic };

struct DatasetKindName {
  DatasetKind kind;
  std::string_view name;  // as written in a config and in `convoy infer --data KIND:SPLIT`
};

// In the order messages list them.
inline constexpr DatasetKindName kDatasetKinds[] = {
    {DatasetKind::fashion_mnist, "fashion-mnist"},
    {DatasetKind::mnist, "mnist"},
    {DatasetKind::cifar10, "cifar10"},
    {DatasetKind::cifar100, "cifar100"},
    {DatasetKind::image_folder, "image-folder"},
    {DatasetKind::csv, "csv"},
    {DatasetKind::synthetic, "synthetic"},
};

// The kind named `name`; nullopt for a name not in kDatasetKinds.
inline std::optional<DatasetKind> dataset_kind_from_name(std::string_view name) {
  for (const DatasetKindName& k : kDatasetKinds)
    if (k.name == name) return k.kind;
  return std::nullopt;
}

// Every kind's name, in kDatasetKinds's order.
inline std::vector<std::string> dataset_kind_names() {
  std::vector<std::string> names;
  for (const DatasetKindName& k : kDatasetKinds) names.emplace_back(k.name);
  return names;
}

}  // namespace convoy
