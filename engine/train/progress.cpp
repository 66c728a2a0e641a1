#include "engine/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace convoy {

namespace {

// "m:ss".
std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  std::ostringstream out;
  out << s / 60 << ':' << std::setw(2) << std::setfill('0') << s % 60;
  return out.str();
}

}  // namespace

Progress::Progress(std::ostream& log, int64_t log_every)
    : log_(log), tty_(&log == &std::cout && isatty(STDOUT_FILENO)), log_every_(log_every) {}

void Progress::update(int64_t epoch, int64_t epochs, int64_t batch, int64_t batches, double loss,
                      double accuracy, double images_per_second, double loader_images_per_second, double eta_seconds) {
  const bool last = batch == batches;
  if (tty_) {
    if (!last && seconds_since(last_draw_) < 0.2) return;
    last_draw_ = std::chrono::steady_clock::now();
    const int width = 24;
    const int filled = static_cast<int>(width * batch / std::max<int64_t>(1, batches));
    log_ << "\r\033[Kepoch " << epoch << "/" << epochs << " [" << std::string(filled, '=')
         << (filled < width ? ">" : "") << std::string(std::max(0, width - filled - 1), ' ')
         << "] " << batch << "/" << batches << line(loss, accuracy, images_per_second, loader_images_per_second, eta_seconds)
         << std::flush;
  } else if (batch % log_every_ == 0 || last) {
    log_ << "epoch " << epoch << "/" << epochs << " step " << batch << "/" << batches
         << line(loss, accuracy, images_per_second, loader_images_per_second, eta_seconds) << std::endl;
  }
}

void Progress::end_epoch() {
  if (tty_) log_ << "\n";
}

std::string Progress::line(double loss, double accuracy, double ips, double loader_ips, double eta) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << "  loss " << loss << std::setprecision(2)
      << "  acc " << accuracy * 100 << "%  " << std::setprecision(0) << ips << " img/s (loader "
      << loader_ips << ")  ETA " << format_duration(eta);
  return out.str();
}

}  // namespace convoy
