#include "scheduler/schedule_cli.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "scheduler/analytic.h"
#include "scheduler/exporters.h"
#include "scheduler/grid.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "scheduler/torch_csv.h"
#include "scheduler/validator.h"

namespace xhc::scheduler {
namespace {

constexpr char kUsage[] =
    "usage: xhc schedule --type TYPE --ranks R --microbatches M [--chunks V]\n"
    "         [--costs f=1,b=2,i=1,w=1,fb=3,overlap=0] [--payload-bytes X --bandwidth-gbps Y "
    "--latency-us Z]\n"
    "         [--activation-bytes X]  (xhc schedule: or --config FILE for the configured model)\n"
    "         [--format text|torch-csv|chrome|svg|json] [--lowered] [--out FILE]\n"
    "       xhc schedule --validate-csv FILE [--costs ...]\n";

struct Options {
  ScheduleRequest request;
  SimCosts costs;
  std::string format = "text";
  std::string out_path;
  std::string validate_csv;
  bool lowered = false;
  bool has_type = false;
};

absl::Status ParseNumber(const std::string& flag, const std::string& text, double* value) {
  if (!absl::SimpleAtod(text, value)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not a number"));
  }
  return absl::OkStatus();
}

absl::Status ParseInt(const std::string& flag, const std::string& text, int* value) {
  if (!absl::SimpleAtoi(text, value)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not an integer"));
  }
  return absl::OkStatus();
}

absl::Status ParseCosts(const std::string& text, SimCosts& costs) {
  std::map<std::string, double*> fields = {{"f", &costs.f},   {"b", &costs.b},
                                           {"i", &costs.i},   {"w", &costs.w},
                                           {"fb", &costs.fb}, {"overlap", &costs.fb_overlap}};
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    auto it = fields.find(kv.first);
    if (it == fields.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--costs: unknown key '", kv.first, "' (known: f, b, i, w, fb, overlap)"));
    }
    RETURN_IF_ERROR(ParseNumber("--costs " + kv.first, kv.second, it->second));
    if (*it->second < 0) return absl::InvalidArgumentError("--costs: costs must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status ApplyFlag(const std::string& flag, const std::string& value, Options& o) {
  if (flag == "--type") {
    o.request.type = value;
    o.has_type = true;
    return absl::OkStatus();
  }
  if (flag == "--ranks") return ParseInt(flag, value, &o.request.num_ranks);
  if (flag == "--microbatches") return ParseInt(flag, value, &o.request.num_microbatches);
  if (flag == "--chunks") return ParseInt(flag, value, &o.request.num_chunks);
  if (flag == "--costs") return ParseCosts(value, o.costs);
  if (flag == "--payload-bytes") return ParseNumber(flag, value, &o.costs.payload_bytes);
  if (flag == "--bandwidth-gbps") return ParseNumber(flag, value, &o.costs.bandwidth_gbps);
  if (flag == "--latency-us") return ParseNumber(flag, value, &o.costs.latency_us);
  if (flag == "--activation-bytes") {
    RETURN_IF_ERROR(ParseNumber(flag, value, &o.costs.activation_bytes));
    if (o.costs.activation_bytes < 0) return absl::InvalidArgumentError(flag + " must be >= 0");
    return absl::OkStatus();
  }
  if (flag == "--out") o.out_path = value;
  if (flag == "--validate-csv") o.validate_csv = value;
  if (flag == "--format") {
    if (value != "text" && value != "torch-csv" && value != "chrome" && value != "svg" &&
        value != "json") {
      return absl::InvalidArgumentError(
          absl::StrCat("--format: '", value, "' is not one of text, torch-csv, chrome, svg, json"));
    }
    o.format = value;
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseArgs(const std::vector<std::string>& args) {
  static const char* kValued[] = {
      "--type",   "--ranks",         "--microbatches",   "--chunks",
      "--costs",  "--payload-bytes", "--bandwidth-gbps", "--latency-us",
      "--format", "--out",           "--validate-csv",   "--activation-bytes"};
  Options o;
  for (size_t k = 0; k < args.size(); ++k) {
    std::string flag = args[k], value;
    if (flag == "--lowered") {
      o.lowered = true;
      continue;
    }
    const size_t eq = flag.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (std::find(std::begin(kValued), std::end(kValued), flag) == std::end(kValued)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", args[k], "'"));
    }
    if (!inline_value) {
      if (k + 1 >= args.size()) return absl::InvalidArgumentError(flag + " needs a value");
      value = args[++k];
    }
    RETURN_IF_ERROR(ApplyFlag(flag, value, o));
  }
  if (o.validate_csv.empty() && !o.has_type) {
    return absl::InvalidArgumentError("--type is required (or --validate-csv FILE)");
  }
  return o;
}

template <typename T>
std::string Join(const std::vector<T>& v) {
  return absl::StrJoin(v, " ");
}

nlohmann::json Stats(const Schedule& s, const SimResult& sim, const SimCosts& costs) {
  std::optional<double> analytic = AnalyticBubble(s, costs);
  return {{"type", s.type},
          {"ranks", s.num_ranks},
          {"microbatches", s.num_microbatches},
          {"chunks", s.num_chunks},
          {"stages", s.num_stages},
          {"rank_stages", s.rank_stages},
          {"makespan", sim.makespan},
          {"bubble", sim.bubble},
          {"bubble_fraction", sim.bubble_fraction},
          {"exposed_comm", sim.exposed_comm},
          {"peak_activations", sim.peak_activations},
          {"activation_bytes", costs.activation_bytes},
          {"peak_activation_bytes", sim.peak_activation_bytes},
          {"analytic_bubble", analytic ? nlohmann::json(*analytic) : nlohmann::json(nullptr)}};
}

// "peak activation memory per rank: 4194304 3145728 bytes (4, 3 x 1048576 ...)".
std::string PeakBytesLine(const std::vector<int>& peaks, const SimCosts& costs) {
  std::vector<std::string> bytes, counts;
  for (int p : peaks) {
    bytes.push_back(absl::StrCat(static_cast<int64_t>(p * costs.activation_bytes)));
    counts.push_back(absl::StrCat(p));
  }
  return absl::StrCat("peak activation memory per rank: ", absl::StrJoin(bytes, " "), " bytes (",
                      absl::StrJoin(counts, ", "), " x ",
                      static_cast<int64_t>(costs.activation_bytes),
                      " bytes of state kept per stage and micro-batch)\n");
}

std::string TextReport(const Schedule& s, const SimResult& sim, const SimCosts& costs) {
  std::ostringstream os;
  os << s.type << ": " << s.num_ranks << " ranks, " << s.num_stages << " stages, "
     << s.num_microbatches << " micro-batches\n"
     << RenderGrid(s.rank_actions) << "makespan: " << sim.makespan << "\n"
     << "bubble per rank: " << Join(sim.bubble) << "\n"
     << "bubble fraction per rank: " << Join(sim.bubble_fraction) << "\n"
     << "exposed comm per rank: " << Join(sim.exposed_comm) << "\n"
     << "peak activations per rank: " << Join(sim.peak_activations) << "\n";
  if (costs.activation_bytes > 0) os << PeakBytesLine(sim.peak_activations, costs);
  if (std::optional<double> a = AnalyticBubble(s, costs)) os << "analytic bubble: " << *a << "\n";
  return os.str();
}

absl::StatusOr<std::string> Render(const Options& o) {
  ASSIGN_OR_RETURN(Schedule s, BuildSchedule(o.request));
  RETURN_IF_ERROR(Validate(s).status());
  if (o.format == "torch-csv") return WriteTorchCsv(o.lowered ? s.Lower() : s.rank_actions);
  ASSIGN_OR_RETURN(SimResult sim, Simulate(s, o.costs));
  if (o.format == "chrome") return ChromeTraceJson(s, sim);
  if (o.format == "svg") return SvgTimeline(s, sim);
  if (o.format == "json") return Stats(s, sim, o.costs).dump(2) + "\n";
  return TextReport(s, sim, o.costs);
}

absl::StatusOr<std::string> ValidateCsvFile(const Options& o) {
  std::ifstream in(o.validate_csv);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", o.validate_csv));
  std::stringstream text;
  text << in.rdbuf();
  return ValidateTorchCsvText(text.str(), o.costs);
}

}  // namespace

absl::StatusOr<std::string> ValidateTorchCsvText(const std::string& text, const SimCosts& costs) {
  ASSIGN_OR_RETURN(std::vector<std::vector<Action>> lists, ReadTorchCsv(text));
  ASSIGN_OR_RETURN(Schedule s, ScheduleFromActions(lists));
  RETURN_IF_ERROR(FillPeers(s, lists));
  ASSIGN_OR_RETURN(ValidationReport report, ValidateLists(s, lists));
  bool lowered = false;
  for (const auto& list : lists) {
    for (const Action& a : list) lowered = lowered || a.IsComm();
  }
  ASSIGN_OR_RETURN(SimResult sim, Simulate(s, lowered ? lists : s.Lower(), costs));
  return absl::StrCat(
      "valid: ", s.num_ranks, " ranks, ", s.num_stages, " stages, ", s.num_microbatches,
      " micro-batches\npeak activations per rank: ", Join(report.peak_activations),
      "\nmakespan: ", sim.makespan, "\nbubble per rank: ", Join(sim.bubble), "\n",
      costs.activation_bytes > 0 ? PeakBytesLine(report.peak_activations, costs) : "");
}

int RunScheduleCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Asked for, the usage is the answer (on stdout, exit 0), as for every other xhc command.
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      out << kUsage;
      return 0;
    }
  }
  absl::StatusOr<Options> options = ParseArgs(args);
  if (!options.ok()) {
    err << "xhc schedule: " << options.status().message() << "\n" << kUsage;
    return 2;
  }
  absl::StatusOr<std::string> text =
      options->validate_csv.empty() ? Render(*options) : ValidateCsvFile(*options);
  if (!text.ok()) {
    err << "xhc schedule: " << text.status().message() << "\n";
    // A bad request is a command-line error; an invalid foreign schedule is not.
    const bool bad_request =
        options->validate_csv.empty() && text.status().code() == absl::StatusCode::kInvalidArgument;
    if (bad_request) err << kUsage;
    return bad_request ? 2 : 1;
  }
  if (options->out_path.empty()) {
    out << *text;
    return 0;
  }
  std::ofstream file(options->out_path);
  file << *text;
  if (!file.good()) {
    err << "xhc schedule: cannot write " << options->out_path << "\n";
    return 1;
  }
  return 0;
}

}  // namespace xhc::scheduler
