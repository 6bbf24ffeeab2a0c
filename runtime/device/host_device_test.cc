// HostDevice: ops and copies run in stream order and copies are real; events order streams
// under seeded delays for many seeds; a missing wait reads a stale value under delays that
// force the order, and the wait fixes it; a copy overlaps compute, as its events' timestamps
// show; ElapsedSeconds covers a sleep; the memory limit refuses before allocating; a failing
// op fails the device for good; bad arguments are refused. Seeds: base/test_seed.h
// (XHC_TEST_SEED=<n> reproduces a printed run).
#include "runtime/device/host_device.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/test_seed.h"
#include "gtest/gtest.h"

namespace xhc::device {
namespace {

#define ASSERT_OK(expr)                   \
  do {                                    \
    const absl::Status status_ = (expr);  \
    ASSERT_TRUE(status_.ok()) << status_; \
  } while (0)

// `text` contains `part` (gmock's HasSubstr; the build has no gmock).
#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

constexpr absl::Duration kTimeout = absl::Seconds(60);

std::unique_ptr<Stream> MustStream(Device& device, const std::string& name) {
  auto stream = device.NewStream(name);
  EXPECT_TRUE(stream.ok()) << stream.status();
  return stream.ok() ? std::move(*stream) : nullptr;
}

std::unique_ptr<Event> MustEvent(Device& device, const std::string& name) {
  auto event = device.NewEvent(name);
  EXPECT_TRUE(event.ok()) << event.status();
  return event.ok() ? std::move(*event) : nullptr;
}

DeviceBuffer MustAllocate(Device& device, size_t bytes, MemoryKind kind) {
  auto buffer = device.Allocate(bytes, kind);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return buffer.ok() ? std::move(*buffer) : DeviceBuffer();
}

// Holds a stream's op until the test opens it (std::mutex, which ThreadSanitizer sees).
class Gate {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  absl::Status Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(HostDevice, OpsOnOneStreamRunInOrderUnderDelays) {
  const uint64_t seed = xhc::testing::TestSeed();
  HostDevice device({.seed = seed, .max_delay_us = 200});
  auto stream = MustStream(device, "compute");
  std::vector<int> order;  // the stream's thread only, until the synchronize
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK(device.Launch(*stream, "append", [&order, i] {
      order.push_back(i);
      return absl::OkStatus();
    }));
  }
  ASSERT_OK(device.SynchronizeStream(*stream, kTimeout));
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(HostDevice, CopiesMoveTheBytesInEveryDirection) {
  const uint64_t seed = xhc::testing::TestSeed();
  HostDevice device({.seed = seed, .max_delay_us = 100});
  auto stream = MustStream(device, "copy");
  constexpr size_t kBytes = 1 << 16;
  DeviceBuffer in = MustAllocate(device, kBytes, MemoryKind::kHost);
  DeviceBuffer a = MustAllocate(device, kBytes, MemoryKind::kDevice);
  DeviceBuffer b = MustAllocate(device, kBytes, MemoryKind::kDevice);
  DeviceBuffer out = MustAllocate(device, kBytes, MemoryKind::kHost);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < kBytes; ++i) in.as<uint8_t>()[i] = static_cast<uint8_t>(rng());
  std::memset(out.data(), 0, kBytes);
  ASSERT_OK(device.CopyAsync(*stream, a, in, kBytes));   // host -> device
  ASSERT_OK(device.CopyAsync(*stream, b, a, kBytes));    // device -> device
  ASSERT_OK(device.CopyAsync(*stream, out, b, kBytes));  // device -> host
  // Offsets: the first half's first 100 bytes moved to the second half's start.
  ASSERT_OK(device.CopyAsync(*stream, out, kBytes / 2, b, 0, 100));
  ASSERT_OK(device.SynchronizeStream(*stream, kTimeout));
  EXPECT_EQ(std::memcmp(out.data(), in.data(), kBytes / 2), 0);
  EXPECT_EQ(std::memcmp(out.as<uint8_t>() + kBytes / 2, in.data(), 100), 0);
  EXPECT_EQ(std::memcmp(out.as<uint8_t>() + kBytes / 2 + 100, in.as<uint8_t>() + kBytes / 2 + 100,
                        kBytes / 2 - 100),
            0);
}

// The executor's pattern: compute writes a micro-batch's state into one of two slots, the
// copy stream moves it to host memory once the compute's event says it is there (read after
// write), and compute reuses a slot only after the copy's event says it was read (write after
// read). Random delays on both streams, for many seeds: every value must arrive intact.
TEST(HostDevice, EventsOrderStreamsUnderSeededDelays) {
  const uint64_t base = xhc::testing::TestSeed();
  constexpr int kSeeds = 12, kMicrobatches = 8, kSlots = 2;
  constexpr size_t kFloats = 2048, kSlotBytes = kFloats * sizeof(float);
  for (int s = 0; s < kSeeds; ++s) {
    const uint64_t seed = base + s;
    SCOPED_TRACE(absl::StrCat("HostDevice seed ", seed));
    HostDevice device({.seed = seed, .max_delay_us = 300});
    auto compute = MustStream(device, "compute");
    auto copy = MustStream(device, "copy");
    DeviceBuffer out = MustAllocate(device, kMicrobatches * kSlotBytes, MemoryKind::kHost);
    std::vector<DeviceBuffer> slots;
    std::vector<std::unique_ptr<Event>> produced, copied;
    for (int i = 0; i < kSlots; ++i) {
      slots.push_back(MustAllocate(device, kSlotBytes, MemoryKind::kDevice));
      produced.push_back(MustEvent(device, absl::StrCat("produced ", i)));
      copied.push_back(MustEvent(device, absl::StrCat("copied ", i)));
    }
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      const int slot = mb % kSlots;
      if (mb >= kSlots) ASSERT_OK(device.WaitEvent(*compute, *copied[slot]));
      float* state = slots[slot].as<float>();
      ASSERT_OK(device.Launch(*compute, absl::StrCat("F", mb), [state, mb] {
        for (size_t i = 0; i < kFloats; ++i) state[i] = static_cast<float>(mb * 10000 + i);
        return absl::OkStatus();
      }));
      ASSERT_OK(device.RecordEvent(*produced[slot], *compute));
      ASSERT_OK(device.WaitEvent(*copy, *produced[slot]));
      ASSERT_OK(device.CopyAsync(*copy, out, mb * kSlotBytes, slots[slot], 0, kSlotBytes));
      ASSERT_OK(device.RecordEvent(*copied[slot], *copy));
    }
    ASSERT_OK(device.SynchronizeStream(*copy, kTimeout));
    ASSERT_OK(device.SynchronizeStream(*compute, kTimeout));
    const float* got = out.as<float>();
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      for (size_t i = 0; i < kFloats; i += 97) {
        ASSERT_EQ(got[mb * kFloats + i], static_cast<float>(mb * 10000 + i))
            << "micro-batch " << mb << " element " << i;
      }
    }
  }
}

// A consumer stream that reads what a producer stream writes, without a WaitEvent, reads the
// old value: the producer's ops are delayed by 250-300 ms and the consumer's by at most 1
// ms, so the read comes first unless the consumer's thread is held off for a quarter of a
// second. With the wait it reads the new value. The value is accessed through atomic_ref so
// ThreadSanitizer (which would rightly report the unordered plain access as a race, another
// way a missing wait is caught) can run this test too.
TEST(HostDevice, MissingWaitReadsStaleValueAndWaitFixesIt) {
  const uint64_t seed = xhc::testing::TestSeed();
  SCOPED_TRACE(absl::StrCat("HostDevice seed ", seed));
  HostDeviceOptions options{.seed = seed};
  options.stream_delays["producer"] = {250'000, 300'000};
  options.stream_delays["consumer"] = {0, 1'000};
  HostDevice device(options);
  auto producer = MustStream(device, "producer");
  auto consumer = MustStream(device, "consumer");
  auto written = MustEvent(device, "written");
  DeviceBuffer value = MustAllocate(device, sizeof(int32_t), MemoryKind::kDevice);
  int32_t* cell = value.as<int32_t>();
  auto write = [cell](int32_t v) {
    return [cell, v] {
      std::atomic_ref<int32_t>(*cell).store(v, std::memory_order_relaxed);
      return absl::OkStatus();
    };
  };
  int32_t observed = -1;  // the consumer's thread only, until the synchronize
  auto read = [cell, &observed] {
    observed = std::atomic_ref<int32_t>(*cell).load(std::memory_order_relaxed);
    return absl::OkStatus();
  };
  ASSERT_OK(device.Launch(*consumer, "init", write(0)));
  ASSERT_OK(device.SynchronizeStream(*consumer, kTimeout));

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(device.Launch(*producer, "write 1", write(1)));
  ASSERT_OK(device.RecordEvent(*written, *producer));
  ASSERT_OK(device.Launch(*consumer, "read (no wait)", read));  // the bug: no WaitEvent
  ASSERT_OK(device.SynchronizeStream(*consumer, kTimeout));
  const double read_after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(observed, 0) << "the unordered read saw the producer's write; it returned "
                         << read_after_s << " s after the write was enqueued";
  ASSERT_OK(device.SynchronizeStream(*producer, kTimeout));

  ASSERT_OK(device.Launch(*producer, "write 2", write(2)));
  ASSERT_OK(device.RecordEvent(*written, *producer));
  ASSERT_OK(device.WaitEvent(*consumer, *written));
  ASSERT_OK(device.Launch(*consumer, "read (after wait)", read));
  ASSERT_OK(device.SynchronizeStream(*consumer, kTimeout));
  EXPECT_EQ(observed, 2);
}

// Overlap observed, not assumed: the copy stream's events fall inside the compute op's.
TEST(HostDevice, CopyOnCopyStreamOverlapsComputeOp) {
  HostDevice device;
  auto compute = MustStream(device, "compute");
  auto copy = MustStream(device, "copy");
  auto c0 = MustEvent(device, "compute start"), c1 = MustEvent(device, "compute end");
  auto k0 = MustEvent(device, "copy start"), k1 = MustEvent(device, "copy end");
  constexpr size_t kBytes = 8 << 20;
  DeviceBuffer src = MustAllocate(device, kBytes, MemoryKind::kDevice);
  DeviceBuffer dst = MustAllocate(device, kBytes, MemoryKind::kHost);
  std::memset(src.data(), 0x5a, kBytes);  // host-addressable on this device
  std::memset(dst.data(), 0, kBytes);
  ASSERT_OK(device.RecordEvent(*c0, *compute));
  ASSERT_OK(device.Launch(*compute, "F", [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return absl::OkStatus();
  }));
  ASSERT_OK(device.RecordEvent(*c1, *compute));
  ASSERT_OK(device.RecordEvent(*k0, *copy));
  ASSERT_OK(device.CopyAsync(*copy, dst, src, kBytes));
  ASSERT_OK(device.RecordEvent(*k1, *copy));
  ASSERT_OK(device.SynchronizeStream(*compute, kTimeout));
  ASSERT_OK(device.SynchronizeStream(*copy, kTimeout));
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kBytes), 0);
  auto copy_start_to_compute_end = device.ElapsedSeconds(*k0, *c1);
  auto compute_start_to_copy_end = device.ElapsedSeconds(*c0, *k1);
  auto copy_s = device.ElapsedSeconds(*k0, *k1);
  ASSERT_TRUE(copy_start_to_compute_end.ok()) << copy_start_to_compute_end.status();
  ASSERT_TRUE(compute_start_to_copy_end.ok()) << compute_start_to_copy_end.status();
  ASSERT_TRUE(copy_s.ok()) << copy_s.status();
  std::printf("copy of %zu bytes: %.3f ms; it started %.3f ms before the compute op ended\n",
              kBytes, *copy_s * 1e3, *copy_start_to_compute_end * 1e3);
  // Both in flight at once: each started before the other ended.
  EXPECT_GT(*copy_start_to_compute_end, 0.0);
  EXPECT_GT(*compute_start_to_copy_end, 0.0);
}

TEST(HostDevice, ElapsedSecondsCoversASleepInsideAnOp) {
  const uint64_t seed = xhc::testing::TestSeed();
  for (int64_t max_delay_us : {0, 2000}) {
    SCOPED_TRACE(absl::StrCat("max_delay_us ", max_delay_us));
    HostDevice device({.seed = seed, .max_delay_us = max_delay_us});
    auto stream = MustStream(device, "compute");
    auto start = MustEvent(device, "start"), end = MustEvent(device, "end");
    ASSERT_OK(device.RecordEvent(*start, *stream));
    ASSERT_OK(device.Launch(*stream, "sleep", [] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return absl::OkStatus();
    }));
    ASSERT_OK(device.RecordEvent(*end, *stream));
    auto early = device.ElapsedSeconds(*start, *end);  // usually still running: refused
    if (!early.ok()) {
      EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
    }
    ASSERT_OK(device.SynchronizeEvent(*end, kTimeout));
    auto forward = device.ElapsedSeconds(*start, *end);
    auto backward = device.ElapsedSeconds(*end, *start);
    ASSERT_TRUE(forward.ok()) << forward.status();
    ASSERT_TRUE(backward.ok()) << backward.status();
    EXPECT_GE(*forward, 0.030);
    EXPECT_LT(*forward, 30.0);
    EXPECT_EQ(*backward, -*forward);
    auto done = device.EventQuery(*end);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(*done);
  }
}

TEST(HostDevice, AllocationBeyondTheLimitIsRefusedAndNothingAllocated) {
  HostDevice device({.memory_limit_bytes = 1 << 20});
  DeviceBuffer a = MustAllocate(device, 768 << 10, MemoryKind::kDevice);
  EXPECT_EQ(device.BytesInUse(MemoryKind::kDevice), 768u << 10);
  auto refused = device.Allocate(512 << 10, MemoryKind::kDevice);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_CONTAINS(std::string(refused.status().message()),
                  "524288 bytes of device memory requested, 262144 bytes available");
  EXPECT_EQ(device.BytesInUse(MemoryKind::kDevice), 768u << 10);
  // The limit is on device memory; pinned host memory is not counted against it.
  DeviceBuffer pinned = MustAllocate(device, 2 << 20, MemoryKind::kHost);
  EXPECT_EQ(device.BytesInUse(MemoryKind::kHost), 2u << 20);
  a.Reset();
  EXPECT_EQ(device.BytesInUse(MemoryKind::kDevice), 0u);
  DeviceBuffer b = MustAllocate(device, 512 << 10, MemoryKind::kDevice);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % DeviceBuffer::kAlignment, 0u);

  for (size_t bytes : {size_t{0}, kMaxAllocationBytes + 1, ~size_t{0}}) {
    auto bad = device.Allocate(bytes, MemoryKind::kHost);
    ASSERT_FALSE(bad.ok()) << bytes;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  }
}

TEST(HostDevice, NeverRecordedEventIsRefused) {
  HostDevice device;
  auto stream = MustStream(device, "compute");
  auto event = MustEvent(device, "never");
  auto recorded = MustEvent(device, "recorded");
  ASSERT_OK(device.RecordEvent(*recorded, *stream));
  ASSERT_OK(device.SynchronizeStream(*stream, kTimeout));
  EXPECT_EQ(device.WaitEvent(*stream, *event).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(device.SynchronizeEvent(*event, kTimeout).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(device.EventQuery(*event).status().code(), absl::StatusCode::kFailedPrecondition);
  const auto elapsed = device.ElapsedSeconds(*recorded, *event);
  EXPECT_EQ(elapsed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_CONTAINS(std::string(elapsed.status().message()), "'never' was never recorded");
  EXPECT_TRUE(device.Health().ok()) << device.Health();
}

// A re-record replaces the capture: a synchronize after it waits for the new record only.
TEST(HostDevice, RerecordingReplacesTheCapture) {
  Gate gate;
  HostDevice device;
  auto a = MustStream(device, "a"), b = MustStream(device, "b");
  auto event = MustEvent(device, "e");
  absl::Cleanup open_gate = [&gate] { gate.Open(); };  // a failed assertion must not hang
  ASSERT_OK(device.Launch(*a, "held", [&gate] { return gate.Pass(); }));
  ASSERT_OK(device.RecordEvent(*event, *a));
  ASSERT_OK(device.RecordEvent(*event, *b));
  ASSERT_OK(device.SynchronizeEvent(*event, kTimeout));  // returns while `a` is held
  auto done = device.EventQuery(*event);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(*done);
  gate.Open();
  ASSERT_OK(device.SynchronizeStream(*a, kTimeout));
}

TEST(HostDevice, SynchronizeHasADeadline) {
  Gate gate;
  HostDevice device;
  auto stream = MustStream(device, "compute");
  auto event = MustEvent(device, "after held op");
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  ASSERT_OK(device.Launch(*stream, "held", [&gate] { return gate.Pass(); }));
  ASSERT_OK(device.RecordEvent(*event, *stream));
  const absl::Status stream_wait = device.SynchronizeStream(*stream, absl::Milliseconds(20));
  EXPECT_EQ(stream_wait.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_CONTAINS(std::string(stream_wait.message()), "'compute'");
  const absl::Status event_wait = device.SynchronizeEvent(*event, absl::Milliseconds(20));
  EXPECT_EQ(event_wait.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_CONTAINS(std::string(event_wait.message()), "'after held op'");
  auto done = device.EventQuery(*event);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE(*done);
  gate.Open();
  ASSERT_OK(device.SynchronizeEvent(*event, kTimeout));
}

// The first failing op fails the device: later ops on every stream are skipped, waits on
// events recorded after it still end, and every later call is refused with its code.
TEST(HostDevice, FailingOpFailsTheDeviceForGood) {
  Gate gate;
  bool ran_after_on_a = false, ran_on_b = false;
  HostDevice device;
  auto a = MustStream(device, "a"), b = MustStream(device, "b");
  auto event = MustEvent(device, "after failure");
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  ASSERT_OK(device.Launch(*a, "held", [&gate] { return gate.Pass(); }));
  ASSERT_OK(device.Launch(*a, "bad", [] { return absl::InternalError("boom"); }));
  ASSERT_OK(device.Launch(*a, "after", [&] {
    ran_after_on_a = true;
    return absl::OkStatus();
  }));
  ASSERT_OK(device.RecordEvent(*event, *a));
  ASSERT_OK(device.WaitEvent(*b, *event));
  ASSERT_OK(device.Launch(*b, "on b", [&] {
    ran_on_b = true;
    return absl::OkStatus();
  }));
  gate.Open();
  const absl::Status on_b = device.SynchronizeStream(*b, kTimeout);
  EXPECT_EQ(on_b.code(), absl::StatusCode::kInternal);
  EXPECT_CONTAINS(std::string(on_b.message()), "op 'bad' on stream 'a' failed: boom");
  EXPECT_EQ(device.SynchronizeStream(*a, kTimeout).code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(ran_after_on_a);
  EXPECT_FALSE(ran_on_b);
  const absl::Status refused = device.Launch(*b, "late", [] { return absl::OkStatus(); });
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_CONTAINS(std::string(refused.message()), "refused");
  EXPECT_EQ(device.Allocate(64, MemoryKind::kDevice).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(device.Health().code(), absl::StatusCode::kInternal);
}

TEST(HostDevice, BadArgumentsAreRefusedAndFailNothing) {
  HostDevice device, other;
  auto stream = MustStream(device, "compute");
  auto foreign_stream = MustStream(other, "foreign");
  auto foreign_event = MustEvent(other, "foreign");
  DeviceBuffer a = MustAllocate(device, 1024, MemoryKind::kDevice);
  DeviceBuffer b = MustAllocate(device, 1024, MemoryKind::kDevice);
  DeviceBuffer foreign = MustAllocate(other, 1024, MemoryKind::kDevice);
  DeviceBuffer empty;
  const auto code = [](const absl::Status& s) { return s.code(); };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(device.CopyAsync(*stream, a, 1000, b, 0, 100)), kInvalid);  // past dst's end
  EXPECT_EQ(code(device.CopyAsync(*stream, a, 0, b, 1025, 0)), kInvalid);    // offset past src
  EXPECT_EQ(code(device.CopyAsync(*stream, a, 0, a, 50, 100)), kInvalid);    // overlapping
  EXPECT_EQ(code(device.CopyAsync(*stream, a, foreign, 100)), kInvalid);
  EXPECT_EQ(code(device.CopyAsync(*stream, empty, b, 100)), kInvalid);
  EXPECT_EQ(code(device.CopyAsync(*foreign_stream, a, b, 100)), kInvalid);
  EXPECT_EQ(code(device.Launch(*stream, "null", nullptr)), kInvalid);
  EXPECT_EQ(code(device.RecordEvent(*foreign_event, *stream)), kInvalid);
  EXPECT_EQ(code(device.WaitEvent(*stream, *foreign_event)), kInvalid);
  ASSERT_OK(device.CopyAsync(*stream, a, 0, a, 512, 512));  // disjoint halves of one buffer
  ASSERT_OK(device.SynchronizeStream(*stream, kTimeout));
  EXPECT_TRUE(device.Health().ok());
  EXPECT_EQ(HostDevice({.stream_delays = {{"bad", {5, 1}}}}).NewStream("bad").status().code(),
            kInvalid);
}

TEST(HostDevice, DestroyingAStreamLetsItsQueuedOpsFinish) {
  const uint64_t seed = xhc::testing::TestSeed();
  HostDevice device({.seed = seed, .max_delay_us = 500});
  int ran = 0;  // the stream's thread only, until its destructor joined it
  {
    auto stream = MustStream(device, "compute");
    for (int i = 0; i < 20; ++i) {
      ASSERT_OK(device.Launch(*stream, "count", [&ran] {
        ++ran;
        return absl::OkStatus();
      }));
    }
  }
  EXPECT_EQ(ran, 20);
}

}  // namespace
}  // namespace xhc::device
