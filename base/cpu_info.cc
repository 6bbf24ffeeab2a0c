#include "base/cpu_info.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace xhc {

std::string CpuModelNameFrom(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  std::string line, name, family, model;
  auto value = [&line] {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return std::string();
    const size_t start = std::min(line.size(), line.find_first_not_of(" \t", colon + 1));
    std::string v;
    for (char ch : line.substr(start)) {
      if (ch != '"' && ch != '\\' && static_cast<unsigned char>(ch) >= 0x20) v += ch;
    }
    return v;
  };
  while (std::getline(in, line) && !line.empty()) {  // the first processor's block
    if (line.rfind("model name", 0) == 0) name = value();
    if (line.rfind("cpu family", 0) == 0) family = value();
    if (line.rfind("model\t", 0) == 0) model = value();
  }
  if (name.empty()) return "unknown";
  if (family.empty() || model.empty()) return name;
  return name + " (family " + family + " model " + model + ")";
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream s;
  s << in.rdbuf();
  return CpuModelNameFrom(s.str());
}

}  // namespace xhc
