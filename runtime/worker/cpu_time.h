#ifndef XHC_RUNTIME_WORKER_CPU_TIME_H_
#define XHC_RUNTIME_WORKER_CPU_TIME_H_

// CPU time (user + system) of a rank's compute and of the whole process, so a step can say
// how much its other threads took: the transport's (gloo's event loop reads every payload,
// the post thread writes them), gRPC's. On a machine whose cores all run compute threads
// that time comes out of the compute (docs/design/pipeline-wait-accounting.md).

namespace xhc::worker {

struct CpuTimes {
  double team_s = 0;     // the calling thread and its OpenMP team (the schedule's compute)
  double process_s = 0;  // every thread of the process
};

// Opens one (empty) parallel region to read each team thread's own clock.
CpuTimes ReadCpuTimes();

// Seconds of CPU the process's threads outside the team took between two readings.
inline double OtherThreadsCpu(const CpuTimes& before, const CpuTimes& after) {
  const double other = (after.process_s - before.process_s) - (after.team_s - before.team_s);
  return other > 0 ? other : 0;
}

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_CPU_TIME_H_
