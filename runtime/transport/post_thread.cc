#include "runtime/transport/post_thread.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace xhc {

PostThread::PostThread() : thread_([this] { Loop(); }) {}

PostThread::~PostThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  queued_.notify_all();
  thread_.join();
}

PostThread::Id PostThread::Queue(std::function<void()> job) {
  Id id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    queue_.emplace_back(id, std::move(job));
  }
  queued_.notify_one();
  return id;
}

bool PostThread::DoneLocked(Id id) const {
  if (running_ == id) return false;
  return std::none_of(queue_.begin(), queue_.end(),
                      [id](const auto& entry) { return entry.first == id; });
}

bool PostThread::AwaitDone(Id id, absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (interrupted_) return false;
    if (DoneLocked(id)) return true;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    ran_.wait_for(lock, absl::ToChronoMicroseconds(left));
  }
}

bool PostThread::CancelOrAwait(Id id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [id](const auto& entry) { return entry.first == id; });
  if (it != queue_.end()) {
    queue_.erase(it);
    return true;
  }
  ran_.wait(lock, [&] { return running_ != id; });
  return false;
}

void PostThread::Interrupt() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = true;
  }
  ran_.notify_all();
}

void PostThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    queued_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::function<void()> job = std::move(queue_.front().second);
    running_ = queue_.front().first;
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
    running_ = 0;
    ran_.notify_all();
  }
}

}  // namespace xhc
