#pragma once
// The training loop's live progress: a redrawn bar on a terminal, plain periodic lines otherwise.
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace convoy {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class Progress {
 public:
  // A terminal when `log` is std::cout on a tty.
  Progress(std::ostream& log, int64_t log_every);

  void update(int64_t epoch, int64_t epochs, int64_t batch, int64_t batches, double loss,
              double accuracy, double images_per_second, double loader_images_per_second, double eta_seconds);
  void end_epoch();  // ends the redrawn line

 private:
  // The loader's own rate beside the training rate: when the two are close, the run is data-bound.
  static std::string line(double loss, double accuracy, double ips, double loader_ips, double eta);
  std::ostream& log_;
  bool tty_;
  int64_t log_every_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace convoy
