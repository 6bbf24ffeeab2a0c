#ifndef XHC_RUNTIME_CONTROL_DASHBOARD_STATE_JSON_H_
#define XHC_RUNTIME_CONTROL_DASHBOARD_STATE_JSON_H_

// The dashboard's /api/state document: a JobView as JSON (the page polls it). Records come as
// the view holds them, after `steps_from` / `checkpoints_from`, so a page that already has
// the older ones gets only what is new; the last step's spans are shifted to start at 0.

#include <string>

#include "runtime/control/controller/job_view.h"

namespace xhc::dashboard {

std::string StateJson(const controller::JobView& view);

}  // namespace xhc::dashboard

#endif  // XHC_RUNTIME_CONTROL_DASHBOARD_STATE_JSON_H_
