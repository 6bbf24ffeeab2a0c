#ifndef XHC_BASE_STATUS_MACROS_H_
#define XHC_BASE_STATUS_MACROS_H_

// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Abseil 20220623 (Debian 12) ships Status and StatusOr
// but not these macros.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define XHC_CONCAT_INNER_(a, b) a##b
#define XHC_CONCAT_(a, b) XHC_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status xhc_status_ = (expr);       \
    if (!xhc_status_.ok()) return xhc_status_; \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>); on error returns its
// status, otherwise moves the value into `lhs` (which may be a declaration: `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  XHC_ASSIGN_OR_RETURN_IMPL_(XHC_CONCAT_(xhc_statusor_, __LINE__), lhs, expr)

#define XHC_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)    \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // XHC_BASE_STATUS_MACROS_H_
