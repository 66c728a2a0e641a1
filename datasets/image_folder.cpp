// Datasets of image files, listed here and decoded when loaded (FileDataset::load): torchvision's
// ImageFolder layout and CSV manifests of `path,label` lines.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <system_error>

#include "datasets/dataset.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;

// The extensions the image decoder reads (.jpg .jpeg .png, any case). A local check rather than
// is_image_file_name (preprocess.h), which is built on another branch: listing needs no decoder.
bool has_listed_image_extension(const std::string& file_name) {
  const size_t dot = file_name.rfind('.');
  if (dot == std::string::npos || dot == 0) return false;
  std::string ext = file_name.substr(dot + 1);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

bool is_hidden(const std::string& name) { return !name.empty() && name[0] == '.'; }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// What one directory holds, hidden entries left out: subdirectories (symlinks followed) and the
// other entries' names, each sorted bytewise as Python's sorted() sorts str.
struct Listing {
  std::vector<std::string> dirs, files;
};

Listing list_directory(const fs::path& dir) {
  Listing out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_hidden(name)) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec))  // follows symlinks; a broken link counts as a file, as in os.walk
      out.dirs.push_back(name);
    else
      out.files.push_back(name);
  }
  if (ec) throw InputError(file_message(dir, "cannot list the directory: " + ec.message()));
  std::sort(out.dirs.begin(), out.dirs.end());
  std::sort(out.files.begin(), out.files.end());
  return out;
}

// torchvision's make_dataset over one class: os.walk(class_dir, followlinks=True), its
// directories sorted by path and the files of each sorted by name. `ancestors` (canonical
// paths) stops a symlink back up the tree, on which os.walk would loop for ever.
void walk_class(const fs::path& dir, std::set<fs::path>& ancestors,
                std::vector<std::pair<std::string, std::vector<fs::path>>>& out) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec || !ancestors.insert(canonical).second) return;
  const Listing listing = list_directory(dir);
  std::vector<fs::path> images;
  for (const auto& name : listing.files)
    if (has_listed_image_extension(name)) images.push_back(dir / name);
  out.emplace_back(dir.string(), std::move(images));
  for (const auto& name : listing.dirs) walk_class(dir / name, ancestors, out);
  ancestors.erase(canonical);
}

std::vector<fs::path> list_class_images(const fs::path& class_dir) {
  std::set<fs::path> ancestors;
  std::vector<std::pair<std::string, std::vector<fs::path>>> dirs;
  walk_class(class_dir, ancestors, dirs);
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<fs::path> images;
  for (auto& [_, files] : dirs) images.insert(images.end(), files.begin(), files.end());
  return images;
}

// How many samples of each class a limit keeps when the classes are taken in turn, one sample
// each, until `limit` (a class that runs out drops out of the turn): the counts of the first
// `limit` samples of the class-interleaved order, without building that order.
std::vector<int64_t> round_robin_counts(const std::vector<int64_t>& class_sizes, int64_t limit) {
  int64_t total = 0, largest = 0;
  for (int64_t s : class_sizes) total += s, largest = std::max(largest, s);
  if (limit == 0 || limit >= total) return class_sizes;
  auto kept_after = [&](int64_t rounds) {
    int64_t n = 0;
    for (int64_t s : class_sizes) n += std::min(s, rounds);
    return n;
  };
  // The most whole rounds that fit in the limit, then one more sample from the first classes
  // that still have one.
  int64_t lo = 0, hi = largest;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (kept_after(mid) <= limit)
      lo = mid;
    else
      hi = mid - 1;
  }
  std::vector<int64_t> counts(class_sizes.size());
  int64_t left = limit - kept_after(lo);
  for (size_t c = 0; c < class_sizes.size(); ++c) {
    counts[c] = std::min(class_sizes[c], lo);
    if (left > 0 && class_sizes[c] > lo) ++counts[c], --left;
  }
  return counts;
}

void check_limit(std::string_view kind, int64_t limit) {
  if (limit < 0)
    throw InputError(std::string(kind) + ": limit must be >= 0 (0 = all samples), got " +
                     std::to_string(limit));
}

// ---- CSV ----------------------------------------------------------------------------------------

struct CsvRecord {
  int64_t line = 0;  // where the record starts, from 1
  std::vector<std::string> fields;
};

std::string at_line(const fs::path& file, int64_t line) { return file.string() + ":" + std::to_string(line); }

void trim(std::string& s) {
  const auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t start = 0;
  while (start < s.size() && space(s[start])) ++start;
  s.erase(0, start);
}

// RFC 4180, minimally: fields split on commas, a field in double quotes may hold commas, line
// breaks and "" for a quote. Unquoted fields are trimmed of spaces ("a.jpg, 3" is common);
// blank lines are skipped; CRLF and a UTF-8 byte order mark are accepted.
std::vector<CsvRecord> parse_csv(const std::string& text, const fs::path& file) {
  std::vector<CsvRecord> records;
  const size_t n = text.size();
  size_t i = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  int64_t line = 1;
  while (i < n) {
    CsvRecord record{line, {}};
    bool blank = true;
    for (;;) {
      std::string field;
      size_t j = i;
      while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
      if (j < n && text[j] == '"') {
        i = j + 1;
        for (;;) {
          if (i >= n)
            throw InputError(file_message(at_line(file, record.line), "a quoted field is never closed"));
          const char ch = text[i++];
          if (ch == '"') {
            if (i < n && text[i] == '"')
              field += '"', ++i;
            else
              break;
          } else {
            line += ch == '\n';
            field += ch;
          }
        }
        while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) ++i;
        if (i < n && text[i] != ',' && text[i] != '\n')
          throw InputError(file_message(at_line(file, line), "unexpected text after a quoted field"));
        blank = false;
      } else {
        while (i < n && text[i] != ',' && text[i] != '\n') field += text[i++];
        trim(field);
        blank = blank && field.empty();
      }
      record.fields.push_back(std::move(field));
      if (i < n && text[i] == ',') {
        ++i;
        blank = false;
        continue;
      }
      if (i < n) ++i, ++line;  // the '\n'
      break;
    }
    if (!blank) records.push_back(std::move(record));
  }
  return records;
}

bool is_header(const CsvRecord& r) {
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  return r.fields.size() == 2 && lower(r.fields[0]) == "path" && lower(r.fields[1]) == "label";
}

// A label of digits only, short enough for int64: read as a number, so "10" sorts after "9".
bool is_index_label(const std::string& s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// `manifest` when it is a file, else <manifest>/<split>.csv.
fs::path find_manifest(const fs::path& manifest, std::string_view split) {
  std::error_code ec;
  if (fs::is_regular_file(manifest, ec)) return manifest;
  if (!fs::is_directory(manifest, ec))
    throw InputError(file_message(manifest,
                                  "no such file or directory (csv expects a manifest file, or a "
                                  "directory holding <split>.csv)"));
  const fs::path file = manifest / (std::string(split) + ".csv");
  if (fs::exists(file, ec)) return file;
  std::vector<std::string> found;
  for (const auto& name : list_directory(manifest).files)
    if (name.size() > 4 && name.ends_with(".csv")) found.push_back(name);
  throw InputError(
      file_message(file, "no such file (" +
                             (found.empty() ? "no .csv manifests in " + manifest.string()
                                            : "the manifests in " + manifest.string() + ": " + join(found)) +
                             ")"));
}

}  // namespace

std::unique_ptr<FileDataset> load_image_folder(const std::filesystem::path& root, std::string_view split,
                                               int64_t limit) {
  check_limit("image-folder", limit);
  std::error_code ec;
  if (!fs::exists(root, ec))
    throw InputError(file_message(root, "no such directory (the image-folder root)"));
  if (!fs::is_directory(root, ec))
    throw InputError(file_message(root, "is not a directory (the image-folder root)"));
  const fs::path split_dir = root / std::string(split);
  if (!fs::is_directory(split_dir, ec)) {
    const auto splits = list_directory(root).dirs;
    throw InputError(file_message(
        split_dir,
        (fs::exists(split_dir, ec) ? "is not a directory" : "no such directory") +
            std::string(splits.empty() ? "; " + root.string() + " has no split directories"
                                       : "; the splits in " + root.string() + ": " + join(splits))));
  }
  std::vector<std::string> classes = list_directory(split_dir).dirs;
  if (classes.empty())
    throw InputError(file_message(
        split_dir, "no class directories (image-folder expects " + std::string(split) + "/<class>/<image>)"));

  std::vector<std::vector<fs::path>> per_class;
  std::vector<int64_t> sizes;
  for (const auto& name : classes) {
    per_class.push_back(list_class_images(split_dir / name));
    if (per_class.back().empty())
      throw InputError(
          file_message(split_dir / name, "class '" + name + "' has no images (.jpg, .jpeg, .png)"));
    sizes.push_back(static_cast<int64_t>(per_class.back().size()));
  }
  // A limit keeps the first samples of the class-interleaved order, so that a small subset holds
  // every class; the kept samples stay in ImageFolder's order (by class, then file).
  const std::vector<int64_t> counts = round_robin_counts(sizes, limit);
  std::vector<FileDataset::Sample> samples;
  for (size_t c = 0; c < classes.size(); ++c)
    for (int64_t k = 0; k < counts[c]; ++k)
      samples.push_back({std::move(per_class[c][static_cast<size_t>(k)]), static_cast<int32_t>(c)});
  return std::make_unique<FileDataset>("image-folder:" + std::string(split), std::move(classes),
                                       std::move(samples));
}

std::unique_ptr<FileDataset> load_csv_manifest(const std::filesystem::path& manifest, std::string_view split,
                                               int64_t limit) {
  check_limit("csv", limit);
  const fs::path file = find_manifest(manifest, split);
  std::string text;
  {
    InputFile in(file);
    text.resize(in.size());
    in.read_exact(text.data(), text.size(), "the manifest");
  }
  std::vector<CsvRecord> records = parse_csv(text, file);
  if (!records.empty() && is_header(records.front())) records.erase(records.begin());
  if (records.empty()) throw InputError(file_message(file, "the manifest lists no samples"));

  bool all_indices = true;
  for (const auto& r : records) {
    if (r.fields.size() != 2)
      throw InputError(file_message(
          at_line(file, r.line), "expected 2 fields (path,label), found " + std::to_string(r.fields.size())));
    if (r.fields[0].empty()) throw InputError(file_message(at_line(file, r.line), "empty path"));
    if (r.fields[1].empty()) throw InputError(file_message(at_line(file, r.line), "empty label"));
    all_indices = all_indices && is_index_label(r.fields[1]);
  }
  // Classes are the sorted distinct labels (numbers in numeric order, as "2" < "10"), the label
  // of a sample its class's position; all rows count, so a limit never renumbers classes.
  std::vector<std::string> classes;
  std::map<std::string, int32_t> index_of;
  if (all_indices) {
    std::set<int64_t> values;
    for (const auto& r : records) values.insert(std::stoll(r.fields[1]));
    for (int64_t v : values) classes.push_back(std::to_string(v));
    for (const auto& r : records) index_of.emplace(r.fields[1], 0);
    for (auto& [label, index] : index_of)
      index = static_cast<int32_t>(std::distance(values.begin(), values.find(std::stoll(label))));
  } else {
    for (const auto& r : records) index_of.emplace(r.fields[1], 0);
    for (auto& [label, index] : index_of) {
      index = static_cast<int32_t>(classes.size());
      classes.push_back(label);
    }
  }

  std::vector<int32_t> labels;
  std::vector<int64_t> sizes(classes.size(), 0);
  for (const auto& r : records) {
    labels.push_back(index_of.at(r.fields[1]));
    ++sizes[static_cast<size_t>(labels.back())];
  }
  // The same subset rule as image folders, the rows of each class kept in manifest order.
  std::vector<int64_t> quota = round_robin_counts(sizes, limit);
  const fs::path base = file.parent_path();
  std::vector<FileDataset::Sample> samples;
  const CsvRecord* first_bad = nullptr;
  std::string first_problem;
  int64_t bad = 0;
  for (size_t k = 0; k < records.size(); ++k) {
    if (quota[static_cast<size_t>(labels[k])]-- <= 0) continue;
    const fs::path listed(records[k].fields[0]);
    fs::path path = listed.is_absolute() ? listed : base / listed;
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);  // one stat per file, following symlinks
    if (st.type() != fs::file_type::regular) {
      if (!first_bad) {
        first_bad = &records[k];
        first_problem =
            fs::exists(st) ? path.string() + " is not a regular file" : "no such file " + path.string();
      }
      ++bad;
      continue;
    }
    samples.push_back({std::move(path), labels[k]});
  }
  if (first_bad)
    throw InputError(file_message(at_line(file, first_bad->line),
                                  first_problem + " (" + std::to_string(bad) + " of the " +
                                      std::to_string(bad + static_cast<int64_t>(samples.size())) +
                                      " files listed are missing or not files)"));
  return std::make_unique<FileDataset>("csv:" + std::string(split), std::move(classes), std::move(samples));
}

}  // namespace convoy
