#pragma once
// What `convoy bench` shows: a line per case as it runs, and the markdown report (the
// environment, the table against the peers, GPU over CPU, footnotes and notes).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench/bench_suite.h"

namespace convoy {

// `v` with `digits` decimals.
std::string bench_format_fixed(double v, int digits);
// Three significant figures, at most 1 decimal place above 100; "n/a" when not finite.
std::string bench_format_sig(double v);

// A record's number at `key`; NaN when absent or not a number.
double bench_number(const nlohmann::json& record, const char* key);
// "model|mode|batch|device|precision": the same case measured by different engines.
std::string bench_case_key(const nlohmann::json& record);
// "model mode bN device precision": the case in words.
std::string bench_case_label(const nlohmann::json& record);
// The table's name of a peer engine ("pytorch" -> "PyTorch").
const char* bench_peer_title(const std::string& engine);

// One case's result in a line: throughput, latency, TFLOP/s, rounds, stability; or why not.
std::string bench_case_line(const nlohmann::json& record);
// A record's "slow_samples" in words: how many, and their time on a CPU, waiting for one, blocked.
std::string slow_samples_text(const nlohmann::json& slow);

// The whole report. `peer_engines`: the peers that get columns; `notes`: closing bullets.
std::string bench_markdown(const BenchSuite& suite, const nlohmann::json& env, const nlohmann::json& records,
                           const std::vector<std::string>& peer_engines, const std::vector<std::string>& notes);

}  // namespace convoy
