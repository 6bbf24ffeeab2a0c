// The xHC sublayer on the GPU against the CPU reference (kernels/cpu/xhc/xhc_reference.h).

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/xhc/xhc_reference.h"
#include "kernels/cuda/check/checks.h"
#include "kernels/cuda/check/checks_util.h"

namespace xhc::cuda::check {

std::string XhcCase::Name() const {
  return std::string(mhc ? "mhc" : "xhc") + (mlp ? "_mlp" : "_attn") + "_B" + std::to_string(B) +
         "T" + std::to_string(T) + "N" + std::to_string(N) + "k" + std::to_string(k) + "C" +
         std::to_string(C) + (gram_schmidt ? "" : "_nogs");
}

namespace {

using kernels::XhcConfig;

struct HostParams {  // float32, spec layouts
  std::vector<float> rw, rb, pw, pb, pa, sw, sb, sa, ow, ob, oa;
  std::vector<std::vector<float>> conv;
};

HostParams MakeParams(const XhcShape& s, std::mt19937_64& rng) {
  HostParams h;
  const size_t D = s.D(), Da = s.Da();
  // Larger than the training init so the maps are far from constant and every gradient
  // path carries signal; alphas of order 1 for the same reason.
  h.rw = Randn(s.N * D, 1.0f / std::sqrt(float(D)), rng);
  h.rb = Uniform(s.N, -1, 1, rng);
  h.pw = Randn(s.N * D, 1.0f / std::sqrt(float(D)), rng);
  h.pb = Uniform(s.N, -1, 1, rng);
  h.pa = {0.8f};
  h.sw = Randn(s.k * s.k * Da, 1.0f / std::sqrt(float(Da)), rng);
  h.sb = Uniform(s.k * s.k, -1, 1, rng);
  h.sa = {0.7f};
  h.ow = Randn(s.k * s.K * Da, 1.0f / std::sqrt(float(Da)), rng);
  h.ob = Uniform(s.k * s.K, -1, 1, rng);
  h.oa = {0.6f};
  for (int j = 0; j < s.r; ++j) h.conv.push_back(Randn(size_t(s.kernels[j]) * s.C, 0.3f, rng));
  return h;
}

template <typename T>
T* Ptr(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

}  // namespace

std::vector<Result> CheckXhc(const XhcCase& cs, uint64_t seed) {
  std::vector<Result> out;
  const std::string tag = cs.Name() + ".";
  XhcShape s;
  s.B = cs.B, s.T = cs.T, s.N = cs.N, s.C = cs.C, s.sinkhorn_iters = cs.sinkhorn_iters;
  s.k = cs.mhc ? cs.N : cs.k;
  s.m = cs.mhc ? cs.N : cs.m;
  s.has_router = !cs.mhc;
  s.gram_schmidt = cs.gram_schmidt;
  XhcConfig cfg;
  cfg.type = cs.mhc ? kernels::ResidualType::kMhc : kernels::ResidualType::kXhc;
  cfg.n_streams = cs.N, cfg.n_active = cs.k, cfg.n_fixed = cs.m;
  cfg.gram_schmidt = cs.gram_schmidt, cfg.sinkhorn_iters = cs.sinkhorn_iters;
  cfg.is_mlp = cs.mlp;
  cfg.conv_kernels = cs.mlp && !cs.mhc ? std::vector<int>{4, 8, 12} : std::vector<int>{};
  s.r = static_cast<int>(cfg.conv_kernels.size());
  s.K = s.r + 1;
  for (int j = 0; j < s.r; ++j) s.kernels[j] = cfg.conv_kernels[j];
  if (int e = XhcCheckShape(s)) return {Failed(tag + "shape", e)};

  std::mt19937_64 rng(seed);
  const size_t n = s.tokens(), D = s.D(), C = s.C;
  HostParams hp = MakeParams(s, rng);
  const std::vector<float> X_in = RoundBf16(Randn(n * D, 1.0f, rng));
  const std::vector<float> sub_out = RoundBf16(Randn(n * C, 1.0f, rng));
  const std::vector<float> dX_new = RoundBf16(Randn(n * D, 1.0f, rng));
  const std::vector<float> du = RoundBf16(Randn(n * C, 1.0f, rng));

  // ---- CPU reference ----
  kernels::XhcParamsT<float> P;
  P.router_weight = cs.mhc ? nullptr : hp.rw.data();
  P.router_bias = cs.mhc ? nullptr : hp.rb.data();
  P.pre_weight = hp.pw.data(), P.pre_bias = hp.pb.data(), P.pre_alpha = hp.pa.data();
  P.res_weight = hp.sw.data(), P.res_bias = hp.sb.data(), P.res_alpha = hp.sa.data();
  P.post_weight = hp.ow.data(), P.post_bias = hp.ob.data(), P.post_alpha = hp.oa.data();
  for (auto& w : hp.conv) P.conv_weight.push_back(w.data());
  kernels::XhcCacheT<float> cache;
  std::vector<float> u_ref(n * C), X_ref = X_in, d_out_ref(n * C), dX_ref = dX_new;
  HostParams g0;  // zero gradients, same shapes
  g0.rw.assign(hp.rw.size(), 0), g0.rb.assign(hp.rb.size(), 0), g0.pw.assign(hp.pw.size(), 0);
  g0.pb.assign(hp.pb.size(), 0), g0.pa = {0}, g0.sw.assign(hp.sw.size(), 0);
  g0.sb.assign(hp.sb.size(), 0), g0.sa = {0}, g0.ow.assign(hp.ow.size(), 0);
  g0.ob.assign(hp.ob.size(), 0), g0.oa = {0};
  for (auto& w : hp.conv) g0.conv.emplace_back(w.size(), 0.f);
  HostParams gr = g0;
  kernels::XhcGradsT<float> G;
  G.router_weight = gr.rw.data(), G.router_bias = gr.rb.data();
  G.pre_weight = gr.pw.data(), G.pre_bias = gr.pb.data(), G.pre_alpha = gr.pa.data();
  G.res_weight = gr.sw.data(), G.res_bias = gr.sb.data(), G.res_alpha = gr.sa.data();
  G.post_weight = gr.ow.data(), G.post_bias = gr.ob.data(), G.post_alpha = gr.oa.data();
  for (auto& w : gr.conv) G.conv_weight.push_back(w.data());
  absl::Status st = kernels::ref::XhcPre(cfg, P, s.B, s.T, s.C, X_in.data(), u_ref.data(), &cache);
  if (st.ok()) st = kernels::ref::XhcPost(cfg, P, sub_out.data(), X_ref.data(), &cache);
  if (st.ok()) st = kernels::ref::XhcBackwardOut(cfg, P, dX_new.data(), &cache, d_out_ref.data());
  if (st.ok())
    st = kernels::ref::XhcBackwardInput(cfg, P, X_in.data(), du.data(), dX_ref.data(), &cache);
  if (st.ok()) st = kernels::ref::XhcBackwardWeights(cfg, P, X_in.data(), cache, G);
  if (!st.ok()) {
    Result r;
    r.name = tag + "cpu_reference";
    r.note = st.ToString();
    return {r};
  }

  // ---- GPU ----
  int err = 0;
  auto devf = [&](const std::vector<float>& v) {
    auto d = std::make_unique<Dev>(std::max<size_t>(v.size(), 1) * 4, &err);
    if (!v.empty()) UploadF(*d, v, &err);
    return d;
  };
  auto rw = devf(hp.rw), rb = devf(hp.rb), pw = devf(hp.pw), pb = devf(hp.pb), pa = devf(hp.pa);
  auto sw = devf(hp.sw), sb = devf(hp.sb), sa = devf(hp.sa), ow = devf(hp.ow), ob = devf(hp.ob);
  auto oa = devf(hp.oa);
  std::vector<std::unique_ptr<Dev>> cw, gcw;
  for (auto& w : hp.conv) cw.push_back(devf(w));
  auto grw = devf(g0.rw), grb = devf(g0.rb), gpw = devf(g0.pw), gpb = devf(g0.pb),
       gpa = devf(g0.pa);
  auto gsw = devf(g0.sw), gsb = devf(g0.sb), gsa = devf(g0.sa), gow = devf(g0.ow),
       gob = devf(g0.ob);
  auto goa = devf(g0.oa);
  for (auto& w : g0.conv) gcw.push_back(devf(w));
  XhcDevParams DP;
  DP.router_weight = cs.mhc ? nullptr : rw->as<float>();
  DP.router_bias = cs.mhc ? nullptr : rb->as<float>();
  DP.pre_weight = pw->as<float>(), DP.pre_bias = pb->as<float>(), DP.pre_alpha = pa->as<float>();
  DP.res_weight = sw->as<float>(), DP.res_bias = sb->as<float>(), DP.res_alpha = sa->as<float>();
  DP.post_weight = ow->as<float>(), DP.post_bias = ob->as<float>(), DP.post_alpha = oa->as<float>();
  XhcDevGrads DG;
  DG.router_weight = grw->as<float>(), DG.router_bias = grb->as<float>();
  DG.pre_weight = gpw->as<float>(), DG.pre_bias = gpb->as<float>(), DG.pre_alpha = gpa->as<float>();
  DG.res_weight = gsw->as<float>(), DG.res_bias = gsb->as<float>(), DG.res_alpha = gsa->as<float>();
  DG.post_weight = gow->as<float>(), DG.post_bias = gob->as<float>(),
  DG.post_alpha = goa->as<float>();
  for (int j = 0; j < s.r; ++j)
    DP.conv_weight[j] = cw[j]->as<float>(), DG.conv_weight[j] = gcw[j]->as<float>();

  Dev dXin(n * D * 2, &err), dX(n * D * 2, &err), du_d(n * C * 2, &err), out_d(n * C * 2, &err);
  Dev dXnew(n * D * 2, &err), u_d(n * C * 2, &err), dout_d(n * C * 2, &err);
  Dev cache_d(XhcCacheBytes(s), &err);
  UploadBf16(dXin, X_in, &err), UploadBf16(dX, X_in, &err), UploadBf16(du_d, du, &err);
  UploadBf16(out_d, sub_out, &err), UploadBf16(dXnew, dX_new, &err);
  Poison(u_d, &err), Poison(dout_d, &err), Poison(cache_d, &err);
  XhcDevCache dc;
  void* blas = nullptr;
  if (err == 0) err = XhcCacheCarve(s, cache_d.as<void>(), &dc);
  if (err == 0) err = CublasCreate(&blas);
  if (err == 0) err = XhcPreLaunch(s, DP, dX.as<bf16_t>(), u_d.as<bf16_t>(), &dc, blas, nullptr);
  if (err == 0) err = XhcPostLaunch(s, DP, out_d.as<bf16_t>(), dX.as<bf16_t>(), &dc, nullptr);
  if (err == 0) err = Synchronize();
  if (err) {
    if (blas) CublasDestroy(blas);
    return {Failed(tag + "forward", err)};
  }
  // Selection must agree before anything downstream can (near-ties would differ by rounding).
  std::vector<int> idx(n * s.k);
  err = MemcpyD2H(idx.data(), dc.idx, idx.size() * sizeof(int));
  long mism = 0;
  for (size_t i = 0; i < idx.size(); ++i) mism += idx[i] != cache.idx[i];
  std::vector<float> hpre_ref = cache.hpre, hres_ref = cache.hres, hpost_ref = cache.hpost;
  out.push_back(Compare(tag + "fwd.u", DownloadBf16(u_d, n * C, &err), u_ref, 1e-2));
  for (Result& r :
       CompareStreams(tag + "fwd.X_new", DownloadBf16(dX, n * D, &err), X_ref, X_in,
                      cs.mhc ? std::vector<int>{} : cache.idx, n, s.N, s.k, s.C, 1e-2)) {
    out.push_back(std::move(r));
  }
  auto devvec = [&](const float* p, size_t cnt) {
    std::vector<float> v(cnt, NAN);
    if (err == 0) err = MemcpyD2H(v.data(), p, cnt * 4);
    return v;
  };
  out.push_back(Compare(tag + "fwd.hpre", devvec(dc.hpre, n * s.N), hpre_ref, 1e-3));
  out.push_back(Compare(tag + "fwd.hres", devvec(dc.hres, n * s.k * s.k), hres_ref, 1e-3));
  out.push_back(Compare(tag + "fwd.hpost", devvec(dc.hpost, n * s.k * s.K), hpost_ref, 1e-3));
  if (mism) out.back().note = "selection differs in " + std::to_string(mism) + " slots";

  // Backward: I.1, I.2 (dX in place), W. d_out is poisoned again right before its launch, so
  // nothing the forward left in it can pass for the backward's output.
  Poison(dout_d, &err);
  if (err == 0) err = MemcpyD2D(dX.as<void>(), dXnew.as<void>(), n * D * 2, nullptr);
  if (err == 0)
    err = XhcBackwardOutLaunch(s, DP, dXin.as<bf16_t>(), out_d.as<bf16_t>(), dXnew.as<bf16_t>(),
                               &dc, dout_d.as<bf16_t>(), nullptr);
  if (err == 0)
    err = XhcBackwardInputLaunch(s, DP, dXin.as<bf16_t>(), du_d.as<bf16_t>(), dX.as<bf16_t>(), &dc,
                                 blas, nullptr);
  if (err == 0)
    err = XhcBackwardWeightsLaunch(s, DP, dXin.as<bf16_t>(), out_d.as<bf16_t>(), &dc, DG, blas,
                                   nullptr);
  if (err == 0) err = Synchronize();
  if (blas) CublasDestroy(blas);
  if (err) return {Failed(tag + "backward", err)};
  out.push_back(Compare(tag + "bwd.d_out", DownloadBf16(dout_d, n * C, &err), d_out_ref, 2e-2));
  out.push_back(Compare(tag + "bwd.dX_in", DownloadBf16(dX, n * D, &err), dX_ref, 2e-2));
  auto gcmp = [&](const char* nm, const Dev& d, const std::vector<float>& ref) {
    out.push_back(Compare(tag + "bwd.grad." + nm, DownloadF(d, ref.size(), &err), ref, 3e-2));
  };
  if (!cs.mhc) gcmp("router.weight", *grw, gr.rw), gcmp("router.bias", *grb, gr.rb);
  gcmp("pre.weight", *gpw, gr.pw), gcmp("pre.bias", *gpb, gr.pb), gcmp("pre.alpha", *gpa, gr.pa);
  gcmp("res.weight", *gsw, gr.sw), gcmp("res.bias", *gsb, gr.sb), gcmp("res.alpha", *gsa, gr.sa);
  gcmp("post.weight", *gow, gr.ow), gcmp("post.bias", *gob, gr.ob);
  gcmp("post.alpha", *goa, gr.oa);
  for (int j = 0; j < s.r; ++j)
    gcmp(("conv." + std::to_string(j) + ".weight").c_str(), *gcw[j], gr.conv[j]);
  if (err) out.push_back(Failed(tag + "download", err));
  return out;
}

}  // namespace xhc::cuda::check
