#ifndef XHC_TESTS_UTIL_OWN_NETWORK_H_
#define XHC_TESTS_UTIL_OWN_NETWORK_H_

#include <string>

namespace xhc::testing {

// Moves this process, which must be single-threaded, into a new user namespace where it is
// root and a new network namespace that user namespace owns: a test may then make network
// namespaces, veths, bridges and qdiscs without touching the machine's network, root or
// not. Returns "" or why not (user namespaces disabled), for GTEST_SKIP.
std::string EnterOwnNetwork();

}  // namespace xhc::testing

#endif  // XHC_TESTS_UTIL_OWN_NETWORK_H_
