#include "apps/bench/bench_repeat.h"

#include <algorithm>
#include <map>

#include "apps/bench/bench_report.h"

namespace convoy {

using nlohmann::json;

json median_runs(const json& records, std::vector<std::string>& far_apart) {
  std::map<std::string, std::vector<json>> runs;  // engine + case -> its records, in run order
  std::vector<std::string> order;
  for (const json& r : records) {
    const std::string key = r.value("engine", "") + " " + bench_case_key(r);
    if (!runs.count(key)) order.push_back(key);
    runs[key].push_back(r);
  }
  json kept = json::array();
  for (const std::string& key : order) {
    std::vector<json>& rs = runs[key];
    auto bad = std::find_if(rs.begin(), rs.end(), [](const json& r) { return r.value("status", "") != "ok"; });
    if (bad != rs.end()) {
      kept.push_back(*bad);
      continue;
    }
    json per_run = json::array();
    for (const json& r : rs) per_run.push_back(bench_number(r, "images_per_second"));
    std::sort(rs.begin(), rs.end(), [](const json& a, const json& b) {
      return bench_number(a, "images_per_second") < bench_number(b, "images_per_second");
    });
    const double slowest = bench_number(rs.front(), "images_per_second");
    const double fastest = bench_number(rs.back(), "images_per_second");
    if (slowest > 0 && fastest > 1.25 * slowest)
      far_apart.push_back(rs.front().value("engine", "") + " " + bench_case_label(rs.front()) + " " +
                          bench_format_sig(slowest) + "-" + bench_format_sig(fastest));
    json median = rs[rs.size() / 2];
    median["runs_images_per_second"] = per_run;
    kept.push_back(std::move(median));
  }
  return kept;
}

}  // namespace convoy
