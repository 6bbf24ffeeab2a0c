// What moving one stage-boundary state between two processes on this host costs in CPU time:
// a loopback TCP stream, as gloo's tcp transport uses (the writer's and the reader's thread
// CPU time per message, TCP_NODELAY, the kernel's default buffer sizes), against one
// process_vm_readv copy by the reader (what GlooTransport's same-host path does) and an
// in-process memcpy for scale. A pipeline rank moves 16 such states out and 16 in per step at
// pipeline_bench's size; what they cost lands on the same cores as the compute
// (docs/design/same-host-path.md). Prints one JSON line.
//   bazel run //runtime/transport:copy_cost_bench -- [--mib 4] [--iterations 200]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/median.h"

namespace {

using xhc::Median;

double ThreadCpuMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

double WallMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "copy_cost_bench: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

// Median ms per process_vm_readv of `n` bytes from a child process; -1 where the kernel
// refuses (no ptrace permission, or a seccomp filter).
double ReadvMs(size_t n, int iterations, std::vector<char>* dst) {
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) Die("pipe");
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    std::vector<char> state(n, 7);
    void* address = state.data();
    char done;
    if (!WriteAll(to_parent[1], &address, sizeof address)) _exit(1);
    ReadAll(to_child[0], &done, 1);
    _exit(0);
  }
  void* remote = nullptr;
  if (!ReadAll(to_parent[0], &remote, sizeof remote)) Die("reading the child's address");
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    iovec local{dst->data(), n}, far{remote, n};
    const double t0 = WallMs();
    const ssize_t got = process_vm_readv(pid, &local, 1, &far, 1, 0);
    if (got != static_cast<ssize_t>(n)) {
      ms.clear();
      break;
    }
    ms.push_back(WallMs() - t0);
  }
  WriteAll(to_child[1], "x", 1);
  waitpid(pid, nullptr, 0);
  return ms.empty() ? -1 : Median(ms);
}

struct TcpCost {
  double writer_cpu_ms, reader_cpu_ms, wall_ms;
};

// Per message of `n` bytes, a child writing and this process reading, one-byte reply after
// each (so the writer never runs ahead by more than one message, as a pipeline's sends).
TcpCost Tcp(size_t n, int iterations, const std::vector<char>& src, std::vector<char>* dst) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) Die("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    Die("listening on loopback");
  }
  int result[2];
  if (pipe(result) != 0) Die("pipe");
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    if (s < 0 || connect(s, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) _exit(1);
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const double c0 = ThreadCpuMs();
    for (int i = 0; i < iterations; ++i) {
      char ack;
      if (!WriteAll(s, src.data(), n) || !ReadAll(s, &ack, 1)) _exit(1);
    }
    const double cpu = (ThreadCpuMs() - c0) / iterations;
    WriteAll(result[1], &cpu, sizeof cpu);
    _exit(0);
  }
  const int s = accept(listener, nullptr, nullptr);
  if (s < 0) Die("accept");
  const int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const double w0 = WallMs(), c0 = ThreadCpuMs();
  for (int i = 0; i < iterations; ++i) {
    if (!ReadAll(s, dst->data(), n) || !WriteAll(s, "k", 1)) Die("reading the stream");
  }
  TcpCost cost;
  cost.reader_cpu_ms = (ThreadCpuMs() - c0) / iterations;
  cost.wall_ms = (WallMs() - w0) / iterations;
  if (!ReadAll(result[0], &cost.writer_cpu_ms, sizeof cost.writer_cpu_ms)) Die("writer result");
  waitpid(pid, nullptr, 0);
  close(s);
  close(listener);
  return cost;
}

}  // namespace

int main(int argc, char** argv) {
  double mib = 4;  // pipeline_bench's state: 4 x 128 tokens x 16 streams x 128 channels x 4 B
  int iterations = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mib") {
      mib = std::atof(argv[i + 1]);
    } else if (flag == "--iterations") {
      iterations = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "copy_cost_bench: unknown flag %s (--mib, --iterations)\n", argv[i]);
      return 2;
    }
  }
  if (mib <= 0 || iterations <= 0 || argc % 2 == 0) {
    std::fprintf(stderr, "copy_cost_bench: --mib and --iterations take positive values\n");
    return 2;
  }
  const size_t n = static_cast<size_t>(mib * (1 << 20));
  std::vector<char> src(n, 1), dst(n, 0);
  std::vector<double> copy_ms;
  for (int i = 0; i < iterations; ++i) {
    src[0] = static_cast<char>(i);
    const double t0 = WallMs();
    std::memcpy(dst.data(), src.data(), n);
    copy_ms.push_back(WallMs() - t0);
  }
  const double readv_ms = ReadvMs(n, iterations, &dst);
  const TcpCost tcp = Tcp(n, iterations, src, &dst);
  const double tcp_cpu = tcp.writer_cpu_ms + tcp.reader_cpu_ms;
  std::printf(
      "{\"bytes\": %zu, \"iterations\": %d, \"memcpy_ms\": %.4f, \"process_vm_readv_ms\": %.4f, "
      "\"tcp_writer_cpu_ms\": %.4f, \"tcp_reader_cpu_ms\": %.4f, \"tcp_wall_ms\": %.4f, "
      "\"tcp_cpu_vs_readv\": %.2f}\n",
      n, iterations, Median(copy_ms), readv_ms, tcp.writer_cpu_ms, tcp.reader_cpu_ms, tcp.wall_ms,
      readv_ms > 0 ? tcp_cpu / readv_ms : 0.0);
  return 0;
}
