// Transformer ops on the GPU against the naive CPU references (kernels/cpu/nn/*_ref.h).

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/nn/adamw_ref.h"
#include "kernels/cpu/nn/attention_ref.h"
#include "kernels/cpu/nn/cross_entropy_ref.h"
#include "kernels/cpu/nn/matmul_ref.h"
#include "kernels/cpu/nn/rmsnorm_ref.h"
#include "kernels/cpu/nn/rope_ref.h"
#include "kernels/cpu/nn/swiglu_ref.h"
#include "kernels/cuda/check/checks.h"
#include "kernels/cuda/check/checks_util.h"

namespace xhc::cuda::check {
namespace {

std::unique_ptr<Dev> Bf(const std::vector<float>& v, int* err) {
  auto d = std::make_unique<Dev>(std::max<size_t>(v.size(), 1) * 2, err);
  UploadBf16(*d, v, err);
  return d;
}
std::unique_ptr<Dev> F(const std::vector<float>& v, int* err) {
  auto d = std::make_unique<Dev>(std::max<size_t>(v.size(), 1) * 4, err);
  UploadF(*d, v, err);
  return d;
}
std::unique_ptr<Dev> PoisonedBytes(size_t bytes, int* err) {
  auto d = std::make_unique<Dev>(std::max<size_t>(bytes, 4), err);
  Poison(*d, err);
  return d;
}

void Gemm(int M, int K, int N, void* blas, std::mt19937_64& rng, std::vector<Result>* out) {
  const std::string tag =
      "gemm_M" + std::to_string(M) + "K" + std::to_string(K) + "N" + std::to_string(N) + ".";
  int err = 0;
  auto x = RoundBf16(Randn(size_t(M) * K, 1, rng)), w = RoundBf16(Randn(size_t(N) * K, 0.1f, rng));
  auto dy = RoundBf16(Randn(size_t(M) * N, 1, rng));
  std::vector<float> y(size_t(M) * N), dx(size_t(M) * K), dw(size_t(N) * K, 0.f);
  RequireRef(nn::ref::MatmulForward(y.data(), x.data(), w.data(), M, K, N));
  RequireRef(nn::ref::MatmulBackwardInput(dx.data(), dy.data(), w.data(), M, K, N));
  RequireRef(nn::ref::MatmulBackwardWeight(dw.data(), dy.data(), x.data(), M, K, N));
  auto xd = Bf(x, &err), wd = Bf(w, &err), dyd = Bf(dy, &err);
  auto yd = PoisonedBytes(y.size() * 4, &err), yb = PoisonedBytes(y.size() * 2, &err);
  auto dxd = PoisonedBytes(dx.size() * 2, &err);
  auto dwd = F(std::vector<float>(dw.size(), 0.f), &err);
  if (!err)
    err = GemmForward(blas, xd->as<bf16_t>(), wd->as<bf16_t>(), yd->as<void>(), true, M, K, N,
                      nullptr);
  if (!err)
    err = GemmForward(blas, xd->as<bf16_t>(), wd->as<bf16_t>(), yb->as<void>(), false, M, K, N,
                      nullptr);
  if (!err)
    err = GemmBackwardInput(blas, dyd->as<bf16_t>(), wd->as<bf16_t>(), dxd->as<bf16_t>(), M, K, N,
                            nullptr);
  if (!err)
    err = GemmBackwardWeight(blas, dyd->as<bf16_t>(), xd->as<bf16_t>(), dwd->as<float>(), M, K, N,
                             nullptr);
  if (!err) err = Synchronize();
  if (err) return out->push_back(Failed(tag + "launch", err));
  out->push_back(Compare(tag + "fwd_f32", DownloadF(*yd, y.size(), &err), y, 1e-3));
  out->push_back(Compare(tag + "fwd_bf16", DownloadBf16(*yb, y.size(), &err), y, 1e-2));
  out->push_back(Compare(tag + "bwd_input", DownloadBf16(*dxd, dx.size(), &err), dx, 1e-2));
  out->push_back(Compare(tag + "bwd_weight", DownloadF(*dwd, dw.size(), &err), dw, 1e-3));
}

void RmsNorm(int R, int C, std::mt19937_64& rng, std::vector<Result>* out) {
  const std::string tag = "rmsnorm_R" + std::to_string(R) + "C" + std::to_string(C) + ".";
  int err = 0;
  auto x = RoundBf16(Randn(size_t(R) * C, 1, rng)), w = Uniform(C, 0.5f, 1.5f, rng);
  auto dy = RoundBf16(Randn(size_t(R) * C, 1, rng));
  std::vector<float> y(x.size()), rstd(R), dx(x.size()), dw(C, 0.f);
  RequireRef(nn::ref::RmsnormForward(y.data(), rstd.data(), x.data(), w.data(), R, C, 1e-6f));
  RequireRef(
      nn::ref::RmsnormBackwardInput(dx.data(), dy.data(), x.data(), w.data(), rstd.data(), R, C));
  RequireRef(nn::ref::RmsnormBackwardWeight(dw.data(), dy.data(), x.data(), rstd.data(), R, C));
  auto xd = Bf(x, &err), wd = F(w, &err), dyd = Bf(dy, &err),
       dwd = F(std::vector<float>(C, 0.f), &err);
  auto yd = PoisonedBytes(x.size() * 2, &err), rd = PoisonedBytes(R * 4, &err),
       dxd = PoisonedBytes(x.size() * 2, &err);
  if (!err)
    err = RmsNormForward(xd->as<bf16_t>(), wd->as<float>(), yd->as<bf16_t>(), rd->as<float>(), R, C,
                         1e-6f, nullptr);
  if (!err)
    err = RmsNormBackward(dyd->as<bf16_t>(), xd->as<bf16_t>(), wd->as<float>(), rd->as<float>(),
                          dxd->as<bf16_t>(), dwd->as<float>(), R, C, nullptr);
  if (!err) err = Synchronize();
  if (err) return out->push_back(Failed(tag + "launch", err));
  out->push_back(Compare(tag + "fwd", DownloadBf16(*yd, y.size(), &err), y, 1e-2));
  out->push_back(Compare(tag + "rstd", DownloadF(*rd, R, &err), rstd, 1e-4));
  out->push_back(Compare(tag + "bwd_input", DownloadBf16(*dxd, dx.size(), &err), dx, 1e-2));
  out->push_back(Compare(tag + "bwd_weight", DownloadF(*dwd, C, &err), dw, 1e-3));
}

void RopeSwiglu(int B, int T, int H, int dh, std::mt19937_64& rng, std::vector<Result>* out) {
  const std::string tag = "rope_swiglu_B" + std::to_string(B) + "T" + std::to_string(T) + "H" +
                          std::to_string(H) + "d" + std::to_string(dh) + ".";
  int err = 0;
  const size_t n = size_t(B) * T * H * dh;
  auto x = RoundBf16(Randn(n, 1, rng)), a = RoundBf16(Randn(n, 2, rng)),
       b = RoundBf16(Randn(n, 1, rng));
  std::vector<float> r(n), rb(n), h(n), da(n), db(n);
  RequireRef(nn::ref::RopeForward(r.data(), x.data(), B, T, H, dh, 10000.0f));
  RequireRef(nn::ref::RopeBackward(rb.data(), x.data(), B, T, H, dh, 10000.0f));
  RequireRef(nn::ref::SwigluForward(h.data(), a.data(), b.data(), long(n)));
  RequireRef(nn::ref::SwigluBackward(da.data(), db.data(), x.data(), a.data(), b.data(), long(n)));
  auto xd = Bf(x, &err), xd2 = Bf(x, &err), ad = Bf(a, &err), bd = Bf(b, &err);
  auto dhd = Bf(x, &err);  // swiglu's incoming gradient: x reused
  auto hd = PoisonedBytes(n * 2, &err), dad = PoisonedBytes(n * 2, &err),
       dbd = PoisonedBytes(n * 2, &err);
  if (!err) err = Rope(xd->as<bf16_t>(), B, T, H, dh, 10000.f, +1, nullptr);
  if (!err) err = Rope(xd2->as<bf16_t>(), B, T, H, dh, 10000.f, -1, nullptr);
  if (!err)
    err = SwigluForward(ad->as<bf16_t>(), bd->as<bf16_t>(), hd->as<bf16_t>(), long(n), nullptr);
  if (!err)
    err = SwigluBackward(dhd->as<bf16_t>(), ad->as<bf16_t>(), bd->as<bf16_t>(), dad->as<bf16_t>(),
                         dbd->as<bf16_t>(), long(n), nullptr);
  if (!err) err = Synchronize();
  if (err) return out->push_back(Failed(tag + "launch", err));
  out->push_back(Compare(tag + "rope_fwd", DownloadBf16(*xd, n, &err), r, 1e-2));
  out->push_back(Compare(tag + "rope_bwd", DownloadBf16(*xd2, n, &err), rb, 1e-2));
  out->push_back(Compare(tag + "swiglu_fwd", DownloadBf16(*hd, n, &err), h, 1e-2));
  out->push_back(Compare(tag + "swiglu_bwd_a", DownloadBf16(*dad, n, &err), da, 1e-2));
  out->push_back(Compare(tag + "swiglu_bwd_b", DownloadBf16(*dbd, n, &err), db, 1e-2));
}

void Attention(int B, int T, int H, int Hkv, int dh, std::mt19937_64& rng,
               std::vector<Result>* out) {
  const std::string tag = "attention_B" + std::to_string(B) + "T" + std::to_string(T) + "H" +
                          std::to_string(H) + "kv" + std::to_string(Hkv) + "d" +
                          std::to_string(dh) + ".";
  int err = 0;
  const size_t nq = size_t(B) * T * H * dh, nk = size_t(B) * T * Hkv * dh;
  auto q = RoundBf16(Randn(nq, 1, rng)), k = RoundBf16(Randn(nk, 1, rng)),
       v = RoundBf16(Randn(nk, 1, rng));
  auto dout = RoundBf16(Randn(nq, 1, rng));
  std::vector<float> o(nq), lse(size_t(B) * H * T), dq(nq), dk(nk), dv(nk);
  RequireRef(nn::ref::AttentionForward(o.data(), lse.data(), q.data(), k.data(), v.data(), B, T, H,
                                       Hkv, dh));
  // The GPU backward reads its own bf16 out; give the reference the same rounding.
  const auto ob = RoundBf16(o);
  RequireRef(nn::ref::AttentionBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                        k.data(), v.data(), ob.data(), lse.data(), B, T, H, Hkv,
                                        dh));
  auto qd = Bf(q, &err), kd = Bf(k, &err), vd = Bf(v, &err), dod = Bf(dout, &err);
  auto od = PoisonedBytes(nq * 2, &err), ld = PoisonedBytes(lse.size() * 4, &err);
  auto dqd = PoisonedBytes(nq * 2, &err), dkd = PoisonedBytes(nk * 2, &err),
       dvd = PoisonedBytes(nk * 2, &err);
  auto scratch = PoisonedBytes(size_t(B) * T * H * 4, &err);
  if (!err)
    err = AttentionForward(qd->as<bf16_t>(), kd->as<bf16_t>(), vd->as<bf16_t>(), od->as<bf16_t>(),
                           ld->as<float>(), B, T, H, Hkv, dh, nullptr);
  if (!err)
    err = AttentionBackward(dod->as<bf16_t>(), qd->as<bf16_t>(), kd->as<bf16_t>(), vd->as<bf16_t>(),
                            od->as<bf16_t>(), ld->as<float>(), dqd->as<bf16_t>(), dkd->as<bf16_t>(),
                            dvd->as<bf16_t>(), scratch->as<float>(), B, T, H, Hkv, dh, nullptr);
  if (!err) err = Synchronize();
  if (err) return out->push_back(Failed(tag + "launch", err));
  out->push_back(Compare(tag + "fwd", DownloadBf16(*od, nq, &err), o, 1e-2));
  out->push_back(Compare(tag + "lse", DownloadF(*ld, lse.size(), &err), lse, 1e-4));
  out->push_back(Compare(tag + "dq", DownloadBf16(*dqd, nq, &err), dq, 2e-2));
  out->push_back(Compare(tag + "dk", DownloadBf16(*dkd, nk, &err), dk, 2e-2));
  out->push_back(Compare(tag + "dv", DownloadBf16(*dvd, nk, &err), dv, 2e-2));
}

void CrossEntropyAdamW(int R, int V, std::mt19937_64& rng, std::vector<Result>* out) {
  const std::string tag = "ce_adamw_R" + std::to_string(R) + "V" + std::to_string(V) + ".";
  int err = 0;
  auto logits = Randn(size_t(R) * V, 3, rng);
  std::vector<int32_t> tgt(R);
  for (int r = 0; r < R; ++r) tgt[r] = int32_t(rng() % V);
  std::vector<float> lse(R), dl(logits.size());
  float loss = 0;
  RequireRef(nn::ref::CrossEntropyForward(&loss, lse.data(), logits.data(), tgt.data(), R, V));
  RequireRef(
      nn::ref::CrossEntropyBackward(dl.data(), logits.data(), lse.data(), tgt.data(), R, V, 0.5f));
  auto ldv = F(logits, &err), lsed = PoisonedBytes(R * 4, &err), lossd = PoisonedBytes(R * 4, &err);
  auto dld = PoisonedBytes(logits.size() * 4, &err);
  Dev td(R * 4, &err);
  if (!err) err = MemcpyH2D(td.as<void>(), tgt.data(), R * 4);
  if (!err)
    err = CrossEntropyForward(ldv->as<float>(), td.as<int32_t>(), lsed->as<float>(),
                              lossd->as<float>(), R, V, nullptr);
  if (!err)
    err = CrossEntropyBackward(ldv->as<float>(), lsed->as<float>(), td.as<int32_t>(),
                               dld->as<float>(), R, V, 0.5f, nullptr);
  // AdamW over the same number of elements (tail: not a multiple of the block).
  const long n = long(R) * V + 3;
  auto p = Randn(n, 1, rng), g = Randn(n, 1, rng), m = Randn(n, 0.1f, rng),
       v = Uniform(n, 0, 0.1f, rng);
  auto pd = F(p, &err), gd = F(g, &err), md = F(m, &err), vd = F(v, &err),
       pb = PoisonedBytes(n * 2, &err);
  if (!err)
    err = AdamWStep(pd->as<float>(), gd->as<float>(), md->as<float>(), vd->as<float>(),
                    pb->as<bf16_t>(), n, 7, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, true, 0.7f, nullptr);
  if (!err) err = Synchronize();
  if (err) return out->push_back(Failed(tag + "launch", err));
  auto rows = DownloadF(*lossd, R, &err);
  double mean = 0;
  for (float x : rows) mean += x;
  out->push_back(Compare(tag + "ce_loss", {float(mean / R)}, {loss}, 1e-5));
  out->push_back(Compare(tag + "ce_lse", DownloadF(*lsed, R, &err), lse, 1e-5));
  out->push_back(Compare(tag + "ce_bwd", DownloadF(*dld, dl.size(), &err), dl, 1e-4));
  RequireRef(nn::ref::AdamwStep(p.data(), g.data(), m.data(), v.data(), n, 7L, 1e-3f, 0.9f, 0.95f,
                                1e-8f, 0.1f, true, 0.7f));
  out->push_back(Compare(tag + "adamw_param", DownloadF(*pd, n, &err), p, 1e-6));
  out->push_back(Compare(tag + "adamw_m", DownloadF(*md, n, &err), m, 1e-6));
  out->push_back(Compare(tag + "adamw_v", DownloadF(*vd, n, &err), v, 1e-6));
  out->push_back(Compare(tag + "adamw_bf16_copy", DownloadBf16(*pb, n, &err), p, 1e-2));
}

}  // namespace

std::vector<Result> CheckNn(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Result> out;
  void* blas = nullptr;
  if (int e = CublasCreate(&blas)) return {Failed("cublas_create", e)};
  Gemm(64, 128, 96, blas, rng, &out);
  Gemm(37, 72, 50, blas, rng, &out);  // tails: nothing a multiple of a tile
  CublasDestroy(blas);
  RmsNorm(16, 256, rng, &out);
  RmsNorm(7, 300, rng, &out);
  RopeSwiglu(2, 17, 3, 64, rng, &out);
  RopeSwiglu(1, 5, 2, 6, rng, &out);
  Attention(2, 33, 4, 2, 64, rng, &out);
  Attention(1, 9, 3, 3, 40, rng, &out);
  CrossEntropyAdamW(13, 256, rng, &out);
  CrossEntropyAdamW(5, 1000, rng, &out);
  return out;
}

}  // namespace xhc::cuda::check
