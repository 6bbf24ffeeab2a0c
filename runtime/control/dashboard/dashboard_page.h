#ifndef XHC_RUNTIME_CONTROL_DASHBOARD_DASHBOARD_PAGE_H_
#define XHC_RUNTIME_CONTROL_DASHBOARD_DASHBOARD_PAGE_H_

namespace xhc::dashboard {

// dashboard.html, embedded at build time (the genrule in BUILD): HTML, CSS and JavaScript in
// one document that loads nothing else and polls api/state from the server that served it.
extern const char kDashboardHtml[];

}  // namespace xhc::dashboard

#endif  // XHC_RUNTIME_CONTROL_DASHBOARD_DASHBOARD_PAGE_H_
