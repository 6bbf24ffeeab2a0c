#ifndef XHC_RUNTIME_CONTROL_DASHBOARD_PROMETHEUS_TEXT_H_
#define XHC_RUNTIME_CONTROL_DASHBOARD_PROMETHEUS_TEXT_H_

// /metrics: a JobView in Prometheus' text exposition format (version 0.0.4), every family
// with its HELP and TYPE lines. Values of the newest step and checkpoint record, so a scrape
// reads the same numbers as the last lines of metrics.jsonl (at full precision).

#include <string>

#include "runtime/control/controller/job_view.h"

namespace xhc::dashboard {

inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// `view` needs only its newest step and checkpoint record (Controller::View(-1, -1)).
std::string PrometheusText(const controller::JobView& view);

}  // namespace xhc::dashboard

#endif  // XHC_RUNTIME_CONTROL_DASHBOARD_PROMETHEUS_TEXT_H_
