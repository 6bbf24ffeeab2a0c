#ifndef XHC_THIRD_PARTY_OPENBLAS_CBLAS_H_
#define XHC_THIRD_PARTY_OPENBLAS_CBLAS_H_

// Debian's libopenblas-dev puts cblas.h in a multiarch directory that is not on the default
// include path; include it from there.
#include </usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h>  // IWYU pragma: export

#endif  // XHC_THIRD_PARTY_OPENBLAS_CBLAS_H_
