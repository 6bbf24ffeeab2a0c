#ifndef XHC_BASE_SELF_EXEC_H_
#define XHC_BASE_SELF_EXEC_H_

// The command that runs this same program again (a worker spawned by `xhc launch`, the
// re-exec that tunes the environment): argv[0..] to put before the program's own arguments.
//
// Normally {"/proc/self/exe"}. A bundle (runtime/control/bundle) runs the binary through its
// own dynamic loader, so that it works on a machine whose libraries differ or in a root that
// holds nothing else; there /proc/self/exe is the loader and /proc may not be mounted, so the
// bundle's launcher names itself in XHC_BUNDLE (the bundle's root) and, optionally,
// XHC_BUNDLE_LIBRARY_PATH (the loader's search path; default <root>/lib), and the command is
// {<root>/lib/ld-linux-x86-64.so.2, "--library-path", <path>, <root>/bin/xhc}.

#include <string>
#include <vector>

namespace xhc {

std::vector<std::string> SelfCommand();

}  // namespace xhc

#endif  // XHC_BASE_SELF_EXEC_H_
