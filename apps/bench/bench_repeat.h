#pragma once
// `convoy bench --repeat N`: the records of N runs of the comparison reduced to one per engine
// and case.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace convoy {

// One record per engine and case of `records` (every run's, in run order): its median run by
// images/s (the faster of the middle two for an even count), holding every run's images/s in
// runs_images_per_second; a case that failed in any run keeps that run's record. `far_apart`
// gets "engine model mode bN device precision slowest-fastest" for each case whose runs lie
// more than 25% apart.
nlohmann::json median_runs(const nlohmann::json& records, std::vector<std::string>& far_apart);

}  // namespace convoy
