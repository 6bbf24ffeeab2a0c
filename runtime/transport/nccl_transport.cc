#include "runtime/transport/nccl_transport.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_status.h"

namespace xhc {
namespace {

// Shared by the transport and its requests: once failed, everything reports the first error.
struct Comm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::mutex mu;  // serialises NCCL calls issued from several threads
  std::atomic<bool> failed{false};
  absl::Status first_error;

  absl::Status Fail(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed.exchange(true)) {
      first_error = s;
      if (comm != nullptr) ncclCommAbort(comm);  // unblocks every pending operation
      comm = nullptr;
    }
    return first_error;
  }
};

class NcclRequest : public Request {
 public:
  NcclRequest(std::shared_ptr<Comm> comm, cudaEvent_t done, std::string what)
      : comm_(std::move(comm)), done_(done), what_(std::move(what)) {}
  ~NcclRequest() override { cudaEventDestroy(done_); }

  absl::Status Wait(absl::Duration timeout) override {
    if (finished_) return status_;
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      if (comm_->failed.load()) return Finish(comm_->first_error);
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) return Finish(absl::OkStatus());
      if (q != cudaErrorNotReady) {
        return Finish(comm_->Fail(cuda::CudaCodeToStatus(q, what_.c_str())));
      }
      ncclResult_t async_error = ncclSuccess;
      if (ncclCommGetAsyncError(comm_->comm, &async_error) == ncclSuccess &&
          async_error != ncclSuccess) {
        return Finish(comm_->Fail(cuda::NcclToStatus(async_error, what_.c_str())));
      }
      if (absl::Now() > deadline) {
        return Finish(comm_->Fail(absl::DeadlineExceededError(
            absl::StrCat("timed out after ", absl::FormatDuration(timeout), " ", what_))));
      }
      absl::SleepFor(absl::Microseconds(50));
    }
  }

 private:
  absl::Status Finish(absl::Status s) {
    finished_ = true;
    status_ = s;
    return s;
  }
  std::shared_ptr<Comm> comm_;
  cudaEvent_t done_;
  std::string what_;
  bool finished_ = false;
  absl::Status status_;
};

class NcclTransport : public Transport {
 public:
  NcclTransport(int rank, int world, std::shared_ptr<Comm> comm)
      : rank_(rank), world_(world), comm_(std::move(comm)) {}
  ~NcclTransport() override {
    if (comm_->comm != nullptr) ncclCommDestroy(comm_->comm);
    if (comm_->stream != nullptr) cudaStreamDestroy(comm_->stream);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  absl::StatusOr<std::unique_ptr<Request>> Isend(int peer, uint64_t tag, const float* data,
                                                 size_t count) override {
    return PointToPoint(true, peer, tag, const_cast<float*>(data), count);
  }
  absl::StatusOr<std::unique_ptr<Request>> Irecv(int peer, uint64_t tag, float* data,
                                                 size_t count) override {
    return PointToPoint(false, peer, tag, data, count);
  }
  absl::Status AllReduceSum(double* data, size_t count, absl::Duration timeout) override {
    return AllReduce(data, count, ncclFloat64, timeout);
  }
  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override {
    return AllReduce(data, count, ncclFloat32, timeout);
  }
  absl::Status Barrier(absl::Duration timeout) override {
    float* one = nullptr;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&one, sizeof(float)));
    absl::Status s = AllReduce(one, 1, ncclFloat32, timeout);
    cudaFree(one);
    return s;
  }
  void Abort() override { comm_->Fail(absl::AbortedError("transport aborted")).IgnoreError(); }

 private:
  // NCCL matches point-to-point calls by (peer, order), not by tag: the schedule's lowered
  // lists post them in the same order on both sides, and the tag goes into the error text.
  absl::StatusOr<std::unique_ptr<Request>> PointToPoint(bool send, int peer, uint64_t tag,
                                                        float* data, size_t count) {
    if (peer < 0 || peer >= world_ || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("bad peer ", peer));
    }
    if (!IsValidTag(tag)) return absl::InvalidArgumentError("tag not made by MakeTag");
    if (comm_->failed.load()) return comm_->first_error;
    const std::string what =
        absl::StrCat(send ? "send to" : "recv from", " rank ", peer, " (", TagToString(tag), ")");
    std::lock_guard<std::mutex> lock(comm_->mu);
    const ncclResult_t r =
        send ? ncclSend(data, count, ncclFloat32, peer, comm_->comm, comm_->stream)
             : ncclRecv(data, count, ncclFloat32, peer, comm_->comm, comm_->stream);
    if (r != ncclSuccess) return cuda::NcclToStatus(r, what.c_str());
    cudaEvent_t done;
    CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(done, comm_->stream));
    return std::unique_ptr<Request>(new NcclRequest(comm_, done, what));
  }

  absl::Status AllReduce(void* data, size_t count, ncclDataType_t type, absl::Duration timeout) {
    if (comm_->failed.load()) return comm_->first_error;
    cudaEvent_t done;
    {
      std::lock_guard<std::mutex> lock(comm_->mu);
      NCCL_RETURN_IF_ERROR(
          ncclAllReduce(data, data, count, type, ncclSum, comm_->comm, comm_->stream));
      CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      CUDA_RETURN_IF_ERROR(cudaEventRecord(done, comm_->stream));
    }
    NcclRequest request(comm_, done, absl::StrCat("all-reduce of ", count, " values"));
    return request.Wait(timeout);
  }

  int rank_, world_;
  std::shared_ptr<Comm> comm_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> CreateNcclTransport(const NcclTransportOptions& o,
                                                               KvStore* store) {
  ASSIGN_OR_RETURN(int devices, cuda::CudaDeviceCount());
  if (devices <= o.device) {
    return absl::UnavailableError(
        absl::StrCat("NCCL transport: no CUDA device ", o.device, " (", devices, " visible)"));
  }
  CUDA_RETURN_IF_ERROR(cudaSetDevice(o.device));
  const std::string key = o.store_prefix + "nccl-unique-id";
  ncclUniqueId id;
  if (o.rank == 0) {
    NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    RETURN_IF_ERROR(store->Set(key, std::string(id.internal, sizeof(id.internal))));
  } else {
    ASSIGN_OR_RETURN(std::vector<std::string> v, store->Get({key}, o.connect_timeout));
    if (v[0].size() != sizeof(id.internal)) {
      return absl::DataLossError("NCCL transport: malformed unique id in the store");
    }
    std::copy(v[0].begin(), v[0].end(), id.internal);
  }
  auto comm = std::make_shared<Comm>();
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&comm->stream, cudaStreamNonBlocking));
  NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comm->comm, o.world_size, id, o.rank));
  return std::unique_ptr<Transport>(new NcclTransport(o.rank, o.world_size, std::move(comm)));
}

}  // namespace xhc
