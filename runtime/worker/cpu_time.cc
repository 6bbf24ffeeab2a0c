#include "runtime/worker/cpu_time.h"

#include <sys/resource.h>

namespace xhc::worker {
namespace {

double Seconds(const struct rusage& u) {
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

CpuTimes ReadCpuTimes() {
  CpuTimes t;
  double team = 0;
  // The kernels' parallel regions reuse this team (libgomp keeps its threads), so each
  // member's own clock covers its share of the step's compute, spin-waits included.
#pragma omp parallel reduction(+ : team)
  {
    struct rusage u;
    if (getrusage(RUSAGE_THREAD, &u) == 0) team += Seconds(u);
  }
  t.team_s = team;
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) == 0) t.process_s = Seconds(u);
  return t;
}

}  // namespace xhc::worker
