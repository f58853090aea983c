#include "rpc/metrics_text.h"

#include <cstdlib>
#include <sstream>

namespace specserve::rpc {

double SumSamples(const std::string& text, const std::string& name, const std::vector<std::string>& labels) {
  std::istringstream in(text);
  double sum = 0;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.compare(0, name.size(), name) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    bool all = true;
    for (const std::string& l : labels) all = all && line.find(l) != std::string::npos;
    if (!all) continue;
    // `name{labels} value [timestamp]`: the value follows the label set.
    const size_t close = line.rfind('}');
    const size_t start = line.find(' ', close == std::string::npos ? name.size() : close);
    if (start == std::string::npos) continue;
    char* end = nullptr;
    const double v = std::strtod(line.c_str() + start, &end);
    if (end == line.c_str() + start) continue;
    sum += v;
    found = true;
  }
  return found ? sum : -1;
}

}  // namespace specserve::rpc
