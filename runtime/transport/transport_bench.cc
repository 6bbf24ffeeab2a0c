// Throughput of GlooTransport's point-to-point against gloo's own unbound-buffer send/recv of
// the same bytes over the same connections (so the ratio isolates our wrapper's overhead).
// Two ranks run as two threads on loopback; rank 0 streams [tokens, 16, C] float payloads
// to rank 1. Prints one JSON line.
//   bazel run -c opt //runtime/transport:transport_bench

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/median.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "runtime/transport/gloo_transport.h"
#include "runtime/transport/memory_kv_store.h"

namespace xhc {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(60);
constexpr uint64_t kRawSlot = 0x1234;  // top byte 0: disjoint from our tags and gloo's

struct Payload {
  int tokens;
  int streams;
  int channels;
  int iterations;
  size_t count() const { return static_cast<size_t>(tokens) * streams * channels; }
};

bool Check(const absl::Status& status) {
  if (!status.ok()) std::fprintf(stderr, "transport_bench: %s\n", status.ToString().c_str());
  return status.ok();
}

// One timed stream of `iterations` messages through the Transport API.
bool StreamXhc(GlooTransport& t, std::vector<float>& buffer, int iterations) {
  for (int i = 0; i < iterations; ++i) {
    const uint64_t tag = MakeTag(TagKind::kForwardActivation, 0, i);
    absl::StatusOr<std::unique_ptr<Request>> request =
        t.rank() == 0 ? t.Isend(1, tag, buffer.data(), buffer.size())
                      : t.Irecv(0, tag, buffer.data(), buffer.size());
    if (!Check(request.status()) || !Check((*request)->Wait(kTimeout))) return false;
  }
  return true;
}

// The same stream through raw gloo unbound buffers.
void StreamRaw(GlooTransport& t, std::vector<float>& buffer, int iterations) {
  const auto& context = t.gloo_context();
  auto unbound = context->createUnboundBuffer(buffer.data(), buffer.size() * sizeof(float));
  for (int i = 0; i < iterations; ++i) {
    if (t.rank() == 0) {
      unbound->send(1, kRawSlot);
      unbound->waitSend(std::chrono::milliseconds(60000));
    } else {
      unbound->recv(0, kRawSlot);
      unbound->waitRecv(std::chrono::milliseconds(60000));
    }
  }
}

// Seconds for one stream, measured between barriers so both ranks are done.
double TimeStream(GlooTransport& t, std::vector<float>& buffer, int iterations, bool raw) {
  if (!Check(t.Barrier(kTimeout))) return -1;
  const absl::Time start = absl::Now();
  if (raw) {
    StreamRaw(t, buffer, iterations);
  } else if (!StreamXhc(t, buffer, iterations)) {
    return -1;
  }
  if (!Check(t.Barrier(kTimeout))) return -1;
  return absl::ToDoubleSeconds(absl::Now() - start);
}

struct Result {
  double xhc_gbps;
  double raw_gbps;
  double ratio;  // median over pairs of back-to-back trials
};

// Many short trials, wrapper and raw back to back with the order alternating, so load from
// other processes on a shared 2-core box hits both sides of each pair alike; the median of
// the per-pair ratios is the figure of merit. Results are rank 0's.
Result Measure(GlooTransport& t, const Payload& p, int num_pairs) {
  std::vector<float> buffer(p.count(), 1.0f);
  TimeStream(t, buffer, 2, /*raw=*/false);  // warm up connections and allocations
  TimeStream(t, buffer, 2, /*raw=*/true);
  const double bytes = static_cast<double>(p.count()) * sizeof(float) * p.iterations;
  std::vector<double> xhc_gbps, raw_gbps, ratios;
  for (int pair = 0; pair < num_pairs; ++pair) {
    const bool raw_first = pair % 2 == 1;
    const double first = TimeStream(t, buffer, p.iterations, raw_first);
    const double second = TimeStream(t, buffer, p.iterations, !raw_first);
    const double xhc_s = raw_first ? second : first;
    const double raw_s = raw_first ? first : second;
    xhc_gbps.push_back(bytes / xhc_s / 1e9);
    raw_gbps.push_back(bytes / raw_s / 1e9);
    ratios.push_back(raw_s / xhc_s);
  }
  return {Median(xhc_gbps), Median(raw_gbps), Median(ratios)};
}

std::string RunBench(const std::vector<Payload>& payloads) {
  MemoryKvStore store;
  std::vector<std::unique_ptr<GlooTransport>> ranks(2);
  std::vector<Result> results(payloads.size());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      GlooTransportOptions options;
      options.rank = rank;
      options.world_size = 2;
      absl::StatusOr<std::unique_ptr<GlooTransport>> t = GlooTransport::Create(options, &store);
      if (!Check(t.status())) std::exit(1);
      for (size_t i = 0; i < payloads.size(); ++i) {
        Result measured = Measure(**t, payloads[i], /*num_pairs=*/31);
        if (rank == 0) results[i] = measured;
      }
      ranks[rank] = std::move(*t);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<std::string> entries;
  double min_ratio = 1e30;
  for (size_t i = 0; i < payloads.size(); ++i) {
    const Payload& p = payloads[i];
    const double ratio = results[i].ratio;
    min_ratio = std::min(min_ratio, ratio);
    entries.push_back(
        absl::StrFormat("{\"shape\":[%d,%d,%d],\"bytes\":%d,\"iterations\":%d,\"xhc_gbps\":%.3f,"
                        "\"gloo_raw_gbps\":%.3f,\"median_pair_ratio\":%.3f}",
                        p.tokens, p.streams, p.channels, p.count() * sizeof(float), p.iterations,
                        results[i].xhc_gbps, results[i].raw_gbps, ratio));
  }
  return absl::StrFormat(
      "{\"bench\":\"transport_p2p\",\"transport\":\"gloo-tcp-loopback\",\"ranks\":\"2 threads\","
      "\"payloads\":[%s],\"min_ratio\":%.3f,\"target_ratio\":0.9,\"pass\":%s}",
      absl::StrJoin(entries, ","), min_ratio, min_ratio >= 0.9 ? "true" : "false");
}

}  // namespace
}  // namespace xhc

int main() {
  // [tokens, N = 16 streams, C]: the stage-boundary residual state of the xHC model.
  const std::vector<xhc::Payload> payloads = {
      {1024, 16, 256, 4},  // 16 MiB
      {64, 16, 256, 32},   // 1 MiB
  };
  std::printf("%s\n", xhc::RunBench(payloads).c_str());
  return 0;
}
