// test-backend-ops: one table of op cases (shapes with odd sizes and the Qwen3 dims 64 / 128 / 2560, dtypes,
// strided and misaligned views, in-place use, accumulation into non-zero gradients); each case runs the CPU
// reference and the CUDA twin on the same values and compares every output (backend_harness.h states how, and
// the tolerances). One gtest per op, printing "op: passed/total OK, worst rel err ..." — skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend_harness.h"
#include "ops/cross_entropy.h"
#include "ops/cuda/cross_entropy.h"
#include "ops/distillation.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/kv_store.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

namespace nvfp4lm::test::backend::test_backend_ops {
namespace {

constexpr DType kF32 = DType::F32;
constexpr DType kBF16 = DType::BF16;

std::string layout(int64_t pad, int64_t offset) {
  if (pad == 0) return "contiguous";
  return fmt::format("view(pad={},offset={})", pad, offset);
}

// ---- gemm / linear ----------------------------------------------------------------------------------------------

Case gemm_case(int64_t m, int64_t k, int64_t n, bool ta, bool tb, DType ab, DType c_dtype, float alpha, float beta,
               int64_t pad = 0, int64_t offset = 0) {
  const std::string params =
      fmt::format("M={} K={} N={} {}{} {}x{}->{} alpha={} beta={} {}", m, k, n, ta ? "T" : "N", tb ? "T" : "N",
                  dtype_str(ab), dtype_str(ab), dtype_str(c_dtype), alpha, beta, layout(pad, offset));
  return {
      "gemm", params, [=](Rng& rng) {
        const Tensor a = round_to(random_normal(ta ? Shape{k, m} : Shape{m, k}, rng), ab);
        const Tensor b = round_to(random_normal(tb ? Shape{n, k} : Shape{k, n}, rng), ab);
        const Tensor c0 = round_to(random_normal({m, n}, rng), c_dtype);
        Tensor expected = c0.clone();
        gemm(a, ta, b, tb, expected, alpha, beta);
        const DeviceView da = upload_view(a, ab, pad, offset);
        const Tensor db = upload(b, ab);
        // beta == 0 must not read C: start from NaN then.
        DeviceView dc = beta == 0.f ? poisoned({m, n}, c_dtype, pad, offset) : upload_view(c0, c_dtype, pad, offset);
        gemm(da.view, ta, db, tb, dc.view, alpha, beta);
        return std::vector<Output>{compare_view("C", dc, expected, product_bound(ab, c_dtype))};
      }};
}

// dw [out, in] (F32) += dyᵀ x with BF16 dy / x: the parameter-gradient GEMM.
Case linear_backward_weight_case(int64_t rows, int64_t in, int64_t out, DType dtype) {
  return {"linear_backward_weight", fmt::format("N={} in={} out={} {} -> F32 dw +=", rows, in, out, dtype_str(dtype)),
          [=](Rng& rng) {
            const Tensor dy = round_to(random_normal({rows, out}, rng), dtype);
            const Tensor x = round_to(random_normal({rows, in}, rng), dtype);
            const Tensor dw0 = random_normal({out, in}, rng);
            Tensor expected = dw0.clone();
            linear_backward_weight(dy, x, expected);
            DeviceView ddw = upload_view(dw0, kF32);
            Tensor ddy = upload(dy, dtype), dx = upload(x, dtype);
            linear_backward_weight(ddy, dx, ddw.view);
            return std::vector<Output>{compare_view("dw", ddw, expected, product_bound(dtype, kF32))};
          }};
}

// logits F32 [N, V] = hidden (BF16) · lm_headᵀ (BF16): inference's last-position logits.
Case lm_head_logits_case(int64_t rows, int64_t hidden_dim, int64_t vocab) {
  return {"lm_head_logits", fmt::format("N={} H={} V={} BF16 -> F32", rows, hidden_dim, vocab), [=](Rng& rng) {
            const Tensor h = round_to(random_normal({rows, hidden_dim}, rng), kBF16);
            const Tensor w = round_to(random_normal({vocab, hidden_dim}, rng, 0.1f), kBF16);
            Tensor expected = Tensor::empty({rows, vocab}, kF32);
            lm_head_logits(h, w, expected);
            DeviceView logits = poisoned({rows, vocab}, kF32);
            lm_head_logits(upload(h, kBF16), upload(w, kBF16), logits.view);
            return std::vector<Output>{compare_view("logits", logits, expected, product_bound(kBF16, kF32))};
          }};
}

// ---- elementwise ------------------------------------------------------------------------------------------------

Case add_case(int64_t rows, int64_t width, DType dtype, int64_t pad, int64_t offset, bool in_place) {
  return {in_place ? "add_inplace" : "add",
          fmt::format("[{}, {}] {} {}", rows, width, dtype_str(dtype), layout(pad, offset)), [=](Rng& rng) {
            const Tensor a = round_to(random_normal({rows, width}, rng), dtype);
            const Tensor b = round_to(random_normal({rows, width}, rng), dtype);
            Tensor expected = Tensor::empty({rows, width}, kF32);
            add(a, b, expected);
            DeviceView da = upload_view(a, dtype, pad, offset);
            const DeviceView db = upload_view(b, dtype, pad, (offset + 1) % (pad + 1));
            if (in_place) {
              add_inplace(da.view, db.view);
              return std::vector<Output>{compare_view("a", da, expected, bound_for(dtype))};
            }
            DeviceView out = poisoned({rows, width}, dtype, pad, offset);
            add(da.view, db.view, out.view);
            return std::vector<Output>{compare_view("out", out, expected, bound_for(dtype))};
          }};
}

Case mul_case(int64_t rows, int64_t width, DType dtype, int64_t pad, int64_t offset) {
  return {"mul_inplace", fmt::format("[{}, {}] {} {}", rows, width, dtype_str(dtype), layout(pad, offset)),
          [=](Rng& rng) {
            const Tensor a = round_to(random_normal({rows, width}, rng), dtype);
            const Tensor b = round_to(random_normal({rows, width}, rng), dtype);
            Tensor expected = a.clone();
            mul_inplace(expected, b);
            DeviceView da = upload_view(a, dtype, pad, offset);
            const DeviceView db = upload_view(b, dtype, pad, (offset + 1) % (pad + 1));
            mul_inplace(da.view, db.view);
            // One product and one rounding on either side: F32 agrees bit for bit.
            return std::vector<Output>{
                compare_view("a", da, expected, dtype == kF32 ? Bound{1e-30, 0.0} : bound_for(dtype))};
          }};
}

Case scale_case(int64_t rows, int64_t width, DType dtype, int64_t pad) {
  return {"scale_inplace", fmt::format("[{}, {}] {} {}", rows, width, dtype_str(dtype), layout(pad, 0)), [=](Rng& rng) {
            const Tensor a = round_to(random_normal({rows, width}, rng), dtype);
            Tensor expected = a.clone();
            scale_inplace(expected, -0.37f);
            DeviceView da = upload_view(a, dtype, pad);
            scale_inplace(da.view, -0.37f);
            return std::vector<Output>{compare_view("a", da, expected, bound_for(dtype))};
          }};
}

Case fill_case(int64_t rows, int64_t width, DType dtype, int64_t pad, int64_t offset) {
  return {"fill", fmt::format("[{}, {}] {} {}", rows, width, dtype_str(dtype), layout(pad, offset)), [=](Rng&) {
            Tensor expected = Tensor::empty({rows, width}, kF32);
            fill(expected, 1.5f);
            DeviceView da = poisoned({rows, width}, dtype, pad, offset);
            fill(da.view, 1.5f);
            return std::vector<Output>{compare_view("a", da, expected, bound_for(dtype))};
          }};
}

Case cast_case(int64_t rows, int64_t width, DType from, DType to, int64_t pad, int64_t offset) {
  return {"cast", fmt::format("[{}, {}] {} -> {} {}", rows, width, dtype_str(from), dtype_str(to), layout(pad, offset)),
          [=](Rng& rng) {
            const Tensor src = round_to(random_normal({rows, width}, rng, 3.f), from);
            Tensor expected_narrow = Tensor::empty({rows, width}, to);
            cast(src, expected_narrow);  // the CPU's RNE conversion
            Tensor expected = Tensor::empty({rows, width}, kF32);
            convert_cpu(expected_narrow, expected);
            const DeviceView dsrc = upload_view(src, from, pad, offset);
            DeviceView ddst = poisoned({rows, width}, to, pad, (offset + 1) % (pad + 1));
            cast(dsrc.view, ddst.view);
            // Conversions are exact or correctly rounded on both sides: they must agree bit for bit.
            return std::vector<Output>{compare_view("dst", ddst, expected, Bound{1e-30, 0.0})};
          }};
}

Case dropout_case(int64_t rows, int64_t width, DType dtype, int64_t pad, int64_t offset, bool accumulate) {
  return {"dropout",
          fmt::format("[{}, {}] {} {}{}", rows, width, dtype_str(dtype), layout(pad, offset),
                      accumulate ? " accumulate" : ""),
          [=](Rng& rng) {
            const Tensor src = round_to(random_normal({rows, width}, rng), dtype);
            const Tensor dst0 = round_to(random_normal({rows, width}, rng), dtype);
            Tensor expected = dst0.clone();
            dropout(src, expected, 0.3f, 77, accumulate);
            const DeviceView dsrc = upload_view(src, dtype, pad, offset);
            if (accumulate) {
              DeviceView ddst = upload_view(dst0, dtype, pad, (offset + 1) % (pad + 1));
              dropout(dsrc.view, ddst.view, 0.3f, 77, true);
              return std::vector<Output>{compare_view("dst", ddst, expected, bound_for(dtype))};
            }
            DeviceView ddst = poisoned({rows, width}, dtype, pad, (offset + 1) % (pad + 1));
            dropout(dsrc.view, ddst.view, 0.3f, 77);
            // One product and one rounding on either side: F32 agrees bit for bit.
            return std::vector<Output>{
                compare_view("dst", ddst, expected, dtype == kF32 ? Bound{1e-30, 0.0} : bound_for(dtype))};
          }};
}

Case sum_squares_case(int64_t rows, int64_t width, DType dtype, int64_t pad) {
  return {"sum_squares", fmt::format("[{}, {}] {} {}", rows, width, dtype_str(dtype), layout(pad, 0)), [=](Rng& rng) {
            const Tensor a = round_to(random_normal({rows, width}, rng), dtype);
            const double expected = sum_squares(a);
            const DeviceView da = upload_view(a, dtype, pad);
            return std::vector<Output>{compare_scalar("sum", sum_squares(da.view), expected, kF32Bound)};
          }};
}

// ---- embedding --------------------------------------------------------------------------------------------------

std::vector<int32_t> random_ids(Rng& rng, int64_t count, int64_t range) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (auto& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(range)));
  return ids;
}

Case embedding_forward_case(int64_t count, int64_t vocab, int64_t hidden, DType table_dtype, DType out_dtype,
                            int64_t pad) {
  return {"embedding_forward",
          fmt::format("N={} V={} H={} table {} -> {} {}", count, vocab, hidden, dtype_str(table_dtype),
                      dtype_str(out_dtype), layout(pad, 0)),
          [=](Rng& rng) {
            const Tensor ids = Tensor::from_ints(random_ids(rng, count, vocab), {count});
            const Tensor table = round_to(random_normal({vocab, hidden}, rng), table_dtype);
            Tensor expected = Tensor::empty({count, hidden}, kF32);
            embedding_forward(ids, table, expected);
            DeviceView out = poisoned({count, hidden}, out_dtype, pad, pad > 0 ? 1 : 0);
            embedding_forward(ids.to(gpu()), upload(table, table_dtype), out.view);
            // Table values are representable in table_dtype; a BF16 output rounds F32 ones once.
            return std::vector<Output>{compare_view("out", out, expected, bound_for(out_dtype))};
          }};
}

// KV-cache writes at slots held on the device: T fresh tokens per row into distinct random slots of a cache
// of S (the other slots must keep their values). Exact: bits are copied.
Case store_kv_rows_case(int64_t batch, int64_t tokens, int64_t slots, int64_t heads, int64_t dim, DType dtype) {
  return {"store_kv_rows",
          fmt::format("B={} T={} S={} H={} D={} {}", batch, tokens, slots, heads, dim, dtype_str(dtype)),
          [=](Rng& rng) {
            const Tensor fresh = round_to(random_normal({batch, tokens, heads, dim}, rng), dtype);
            const Tensor cache0 = round_to(random_normal({batch, slots, heads, dim}, rng), dtype);
            std::vector<int32_t> where;
            for (int64_t b = 0; b < batch; ++b) {
              std::vector<int32_t> order(static_cast<size_t>(slots));
              for (int64_t i = 0; i < slots; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
              for (int64_t i = slots - 1; i > 0; --i)
                std::swap(order[static_cast<size_t>(i)], order[rng.below(static_cast<uint64_t>(i + 1))]);
              where.insert(where.end(), order.begin(), order.begin() + tokens);
            }
            const Tensor slot_ids = Tensor::from_ints(where, {batch, tokens});
            Tensor expected = cache0.clone();
            store_kv_rows(fresh, expected, slot_ids);
            Tensor cache = upload(cache0, dtype);
            store_kv_rows(upload(fresh, dtype), cache, slot_ids.to(gpu()));
            return std::vector<Output>{Output{"cache", download(cache), values(expected), kF32Bound, 0}};
          }};
}

Case embedding_backward_case(int64_t count, int64_t vocab, int64_t id_range, int64_t hidden, DType dout_dtype,
                             int64_t pad) {
  return {"embedding_backward",
          fmt::format("N={} V={} ids<{} H={} dout {} {}", count, vocab, id_range, hidden, dtype_str(dout_dtype),
                      layout(pad, 0)),
          [=](Rng& rng) {
            const Tensor ids = Tensor::from_ints(random_ids(rng, count, id_range), {count});
            const Tensor dout = round_to(random_normal({count, hidden}, rng), dout_dtype);
            const Tensor dtable0 = random_normal({vocab, hidden}, rng);  // accumulated into
            Tensor expected = dtable0.clone();
            embedding_backward(ids, dout, expected);
            DeviceView dtable = upload_view(dtable0, kF32);
            const DeviceView ddout = upload_view(dout, dout_dtype, pad, pad > 0 ? 1 : 0);
            embedding_backward(ids.to(gpu()), ddout.view, dtable.view);
            return std::vector<Output>{compare_view("dtable", dtable, expected, kF32Bound)};
          }};
}

// ---- rmsnorm ----------------------------------------------------------------------------------------------------

Case rmsnorm_forward_case(int64_t rows, int64_t dim, DType dtype, int64_t pad, bool in_place) {
  return {"rmsnorm_forward",
          fmt::format("[{}, {}] {} {}{}", rows, dim, dtype_str(dtype), layout(pad, pad > 0 ? 1 : 0),
                      in_place ? " in place" : ""),
          [=](Rng& rng) {
            const Tensor x = round_to(random_normal({rows, dim}, rng, 2.f), dtype);
            const Tensor w = random_normal({dim}, rng);
            Tensor y = Tensor::empty({rows, dim}, kF32), rstd = Tensor::empty({rows}, kF32);
            rmsnorm_forward(x, w, 1e-6f, y, &rstd);
            DeviceView dx = upload_view(x, dtype, pad, pad > 0 ? 1 : 0);
            DeviceView dy = in_place ? dx : poisoned({rows, dim}, dtype, pad, 0);
            DeviceView drstd = poisoned({rows}, kF32);
            rmsnorm_forward(dx.view, w.to(gpu()), 1e-6f, dy.view, &drstd.view);
            return std::vector<Output>{compare_view("y", dy, y, bound_for(dtype)),
                                       compare_view("rstd", drstd, rstd, kF32Bound)};
          }};
}

Case rmsnorm_backward_case(int64_t rows, int64_t dim, DType dtype, int64_t pad, bool dx_is_dy) {
  return {"rmsnorm_backward",
          fmt::format("[{}, {}] {} {}{}", rows, dim, dtype_str(dtype), layout(pad, pad > 0 ? 1 : 0),
                      dx_is_dy ? " dx=dy" : ""),
          [=](Rng& rng) {
            const Tensor x = round_to(random_normal({rows, dim}, rng, 2.f), dtype);
            const Tensor dy = round_to(random_normal({rows, dim}, rng), dtype);
            const Tensor w = random_normal({dim}, rng);
            const Tensor dw0 = random_normal({dim}, rng);
            Tensor y = Tensor::empty({rows, dim}, kF32), rstd = Tensor::empty({rows}, kF32);
            rmsnorm_forward(x, w, 1e-6f, y, &rstd);
            Tensor dx = Tensor::empty({rows, dim}, kF32), dw = dw0.clone();
            rmsnorm_backward(dy, x, w, rstd, dx, dw);

            const DeviceView gx = upload_view(x, dtype, pad, pad > 0 ? 1 : 0);
            DeviceView gdy = upload_view(dy, dtype, pad, 0);
            DeviceView gdx = dx_is_dy ? gdy : poisoned({rows, dim}, dtype, pad, 0);
            DeviceView gdw = upload_view(dw0, kF32);
            rmsnorm_backward(gdy.view, gx.view, w.to(gpu()), rstd.to(gpu()), gdx.view, gdw.view);
            return std::vector<Output>{compare_view("dx", gdx, dx, bound_for(dtype)),
                                       compare_view("dweight", gdw, dw, kF32Bound)};
          }};
}

// QK-norm on the k heads of a fused [tokens, q_heads + kv_heads, head_dim] buffer: a 3-D view whose two leading
// dims do not collapse. Forward in place, then the backward on the same view.
Case rmsnorm_heads_case(int64_t tokens, int64_t q_heads, int64_t kv_heads, int64_t head_dim, DType dtype) {
  return {
      "rmsnorm_heads",
      fmt::format("tokens={} heads {}+{} D={} {} k-head view", tokens, q_heads, kv_heads, head_dim, dtype_str(dtype)),
      [=](Rng& rng) {
        const int64_t heads = q_heads + kv_heads;
        const Tensor fused = round_to(random_normal({tokens, heads, head_dim}, rng, 2.f), dtype);
        const Tensor dy_fused = round_to(random_normal({tokens, heads, head_dim}, rng), dtype);
        const Tensor w = random_normal({head_dim}, rng), dw0 = random_normal({head_dim}, rng);
        // CPU reference on the same views.
        Tensor cpu_fused = fused.clone(), cpu_dy = dy_fused.clone();
        Tensor k = cpu_fused.narrow(1, q_heads, kv_heads), dk = cpu_dy.narrow(1, q_heads, kv_heads);
        const Tensor k_raw = k.contiguous();
        Tensor rstd = Tensor::empty({tokens, kv_heads}, kF32), dw = dw0.clone();
        rmsnorm_forward(k, w, 1e-6f, k, &rstd);
        rmsnorm_backward(dk, k_raw, w, rstd, dk, dw);

        Tensor g_fused = upload(fused, dtype), g_dy = upload(dy_fused, dtype);
        Tensor gk = g_fused.narrow(1, q_heads, kv_heads), gdk = g_dy.narrow(1, q_heads, kv_heads);
        const Tensor g_k_raw = upload(k_raw, dtype);
        DeviceView grstd = poisoned({tokens, kv_heads}, kF32);
        Tensor gw = w.to(gpu());
        DeviceView gdw = upload_view(dw0, kF32);
        rmsnorm_forward(gk, gw, 1e-6f, gk, &grstd.view);
        rmsnorm_backward(gdk, g_k_raw, gw, grstd.view, gdk, gdw.view);
        // Whole fused buffers: the q heads must be untouched.
        return std::vector<Output>{Output{"fused y", download(g_fused), values(cpu_fused), bound_for(dtype)},
                                   Output{"fused dx", download(g_dy), values(cpu_dy), bound_for(dtype)},
                                   compare_view("rstd", grstd, rstd, kF32Bound),
                                   compare_view("dweight", gdw, dw, kF32Bound)};
      }};
}

// ---- rope -------------------------------------------------------------------------------------------------------

// x is the q or k part of a fused [tokens, heads + extra, D] buffer (token stride > heads * D) when extra > 0.
Case rope_case(int64_t batch, int64_t tokens, int64_t heads, int64_t extra_heads, int64_t head_dim, DType dtype,
               bool inverse) {
  return {inverse ? "rope_backward" : "rope_forward",
          fmt::format("[{}, {}, {}, {}] {}{}", batch, tokens, heads, head_dim, dtype_str(dtype),
                      extra_heads > 0 ? fmt::format(" view of {} heads", heads + extra_heads) : ""),
          [=](Rng& rng) {
            const int64_t max_positions = 4 * tokens + 7;
            const Tensor fused = round_to(random_normal({batch, tokens, heads + extra_heads, head_dim}, rng), dtype);
            const Tensor positions = Tensor::from_ints(random_ids(rng, batch * tokens, max_positions), {batch, tokens});
            const float theta = 1e6f;
            Tensor cpu = fused.clone();
            Tensor x = cpu.narrow(2, 0, heads);
            const RopeTable table(head_dim, theta, max_positions);
            Tensor g = upload(fused, dtype);
            Tensor gx = g.narrow(2, 0, heads);
            const RopeTable gtable(head_dim, theta, max_positions, gpu());
            if (inverse) {
              rope_backward(x, positions, table);
              rope_backward(gx, positions.to(gpu()), gtable);
            } else {
              rope_forward(x, positions, table);
              rope_forward(gx, positions.to(gpu()), gtable);
            }
            return std::vector<Output>{Output{"x (whole buffer)", download(g), values(cpu), bound_for(dtype)}};
          }};
}

// rope_forward with theta: angles for the call's positions, computed on the host and uploaded.
Case rope_theta_case(int64_t tokens, int64_t heads, int64_t head_dim, DType dtype) {
  return {"rope_forward_theta", fmt::format("[{}, {}, {}] {}", tokens, heads, head_dim, dtype_str(dtype)),
          [=](Rng& rng) {
            const Tensor x = round_to(random_normal({tokens, heads, head_dim}, rng), dtype);
            const Tensor positions = Tensor::from_ints(random_ids(rng, tokens, 40000), {tokens});
            Tensor cpu = x.clone();
            rope_forward(cpu, positions, 5e6f);
            Tensor g = upload(x, dtype);
            rope_forward(g, positions, 5e6f);
            return std::vector<Output>{Output{"x", download(g), values(cpu), bound_for(dtype)}};
          }};
}

// ---- swiglu -----------------------------------------------------------------------------------------------------

// gate / up are the halves of a fused [N, 2F] buffer; dgate / dup overwrite gate / up when in_place.
Case swiglu_case(int64_t rows, int64_t width, DType dtype, bool backward, bool in_place) {
  return {backward ? "swiglu_backward" : "swiglu_forward",
          fmt::format("[{}, {}] {} fused gate|up{}", rows, width, dtype_str(dtype), in_place ? " in place" : ""),
          [=](Rng& rng) {
            const Tensor fused = round_to(random_normal({rows, 2 * width}, rng, 2.f), dtype);
            const Tensor dout = round_to(random_normal({rows, width}, rng), dtype);
            const Tensor gate = fused.narrow(1, 0, width), up = fused.narrow(1, width, width);
            Tensor g_fused = upload(fused, dtype);
            Tensor g_gate = g_fused.narrow(1, 0, width), g_up = g_fused.narrow(1, width, width);
            if (!backward) {
              Tensor out = Tensor::empty({rows, width}, kF32);
              swiglu_forward(gate, up, out);
              DeviceView g_out = poisoned({rows, width}, dtype, 3, 1);
              swiglu_forward(g_gate, g_up, g_out.view);
              return std::vector<Output>{compare_view("out", g_out, out, bound_for(dtype))};
            }
            Tensor dgate = Tensor::empty({rows, width}, kF32), dup = Tensor::empty({rows, width}, kF32);
            swiglu_backward(dout, gate, up, dgate, dup);
            const Tensor g_dout = upload(dout, dtype);
            if (in_place) {
              swiglu_backward(g_dout, g_gate, g_up, g_gate, g_up);
              const Tensor host = g_fused.to(Device::cpu());
              return std::vector<Output>{
                  Output{"dgate", to_float_vector(host.narrow(1, 0, width)), values(dgate), bound_for(dtype)},
                  Output{"dup", to_float_vector(host.narrow(1, width, width)), values(dup), bound_for(dtype)}};
            }
            DeviceView g_dfused = poisoned({rows, 2 * width}, dtype);
            Tensor g_dgate = g_dfused.view.narrow(1, 0, width), g_dup = g_dfused.view.narrow(1, width, width);
            swiglu_backward(g_dout, g_gate, g_up, g_dgate, g_dup);
            const Tensor host = g_dfused.storage.to(Device::cpu());
            return std::vector<Output>{
                Output{"dgate", to_float_vector(host.narrow(1, 0, width)), values(dgate), bound_for(dtype)},
                Output{"dup", to_float_vector(host.narrow(1, width, width)), values(dup), bound_for(dtype)}};
          }};
}

// ---- fused lm_head + cross-entropy ------------------------------------------------------------------------------

enum class Ignore { None, Some, All };

// Sets NVFP4LM_CE_LOGITS_BYTES for the lifetime of the object (0: leave the default).
class LogitsBudget {
 public:
  explicit LogitsBudget(int64_t bytes) : set_(bytes > 0) {
    if (set_) setenv("NVFP4LM_CE_LOGITS_BYTES", std::to_string(bytes).c_str(), 1);
  }
  ~LogitsBudget() {
    if (set_) unsetenv("NVFP4LM_CE_LOGITS_BYTES");
  }
  LogitsBudget(const LogitsBudget&) = delete;
  LogitsBudget& operator=(const LogitsBudget&) = delete;

 private:
  bool set_;
};

// per_token: random per-token gradient scales (of both signs) and the per-token losses (CrossEntropyTokens).
Case cross_entropy_case(int64_t rows, int64_t hidden_dim, int64_t vocab, DType dtype, Ignore ignore, bool dhidden,
                        bool dweight, int64_t budget_rows = 0, int64_t pad = 0, bool per_token = false) {
  const char* ignore_name = ignore == Ignore::None ? "none" : (ignore == Ignore::Some ? "some" : "all");
  return {
      "lm_head_cross_entropy",
      fmt::format("N={} H={} V={} {} ignored={}{}{}{}{} {}", rows, hidden_dim, vocab, dtype_str(dtype), ignore_name,
                  dhidden ? " +dhidden" : "", dweight ? " +dweight" : "",
                  budget_rows > 0 ? fmt::format(" {} rows/chunk", budget_rows) : "",
                  per_token ? " +token scales/losses" : "", layout(pad, 0)),
      [=](Rng& rng) {
        // Logits of magnitude ~0.5, half the targets set to the fp32 argmax so the correct count means
        // something.
        const Tensor h = round_to(random_normal({rows, hidden_dim}, rng), dtype);
        const Tensor w =
            round_to(random_normal({vocab, hidden_dim}, rng, 0.5f / std::sqrt(static_cast<float>(hidden_dim))), dtype);
        Tensor logits = Tensor::empty({rows, vocab}, kF32);
        gemm(h, false, w, true, logits);
        std::vector<int32_t> targets(static_cast<size_t>(rows));
        const float* z = logits.data<float>();
        for (int64_t i = 0; i < rows; ++i) {
          int32_t& t = targets[static_cast<size_t>(i)];
          if (ignore == Ignore::All || (ignore == Ignore::Some && i % 3 == 1)) {
            t = kIgnoreIndex;
          } else if (i % 2 == 0) {
            t = static_cast<int32_t>(std::max_element(z + i * vocab, z + (i + 1) * vocab) - (z + i * vocab));
          } else {
            t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
          }
        }
        const Tensor target = Tensor::from_ints(targets, {rows});
        const float grad_scale = 1.f / static_cast<float>(std::max<int64_t>(rows, 1));
        const Tensor dw0 = random_normal({vocab, hidden_dim}, rng, grad_scale);  // the size of the gradient
        Tensor dh_ref = Tensor::empty({rows, hidden_dim}, kF32), dw_ref = dw0.clone();
        const Tensor scales = random_normal({rows}, rng);
        Tensor losses_ref = Tensor::empty({rows}, kF32);
        const CrossEntropyTokens ref_tokens =
            per_token ? CrossEntropyTokens{&scales, &losses_ref} : CrossEntropyTokens{};
        const CrossEntropyResult ref = lm_head_cross_entropy(h, w, target, grad_scale, dhidden ? &dh_ref : nullptr,
                                                             dweight ? &dw_ref : nullptr, ref_tokens);
        const Tensor gscales = scales.to(gpu());
        Tensor glosses = Tensor::empty({rows}, kF32, gpu());
        const CrossEntropyTokens got_tokens = per_token ? CrossEntropyTokens{&gscales, &glosses} : CrossEntropyTokens{};

        const DeviceView gh = upload_view(h, dtype, pad, pad > 0 ? 1 : 0);
        const Tensor gw = upload(w, dtype);
        DeviceView gdh = poisoned({rows, hidden_dim}, dtype, pad, 0);
        DeviceView gdw = upload_view(dw0, kF32);
        CrossEntropyResult got;
        {
          const LogitsBudget budget(budget_rows * cuda::cross_entropy_logits_ld(vocab) *
                                    static_cast<int64_t>(dtype_bytes(dtype)));
          got = lm_head_cross_entropy(gh.view, gw, target.to(gpu()), grad_scale, dhidden ? &gdh.view : nullptr,
                                      dweight ? &gdw.view : nullptr, got_tokens);
        }
        std::vector<Output> outputs;
        if (per_token) {  // each token's loss in its place, 0 at ignored ones (BF16: ~2^-7 of a logit)
          outputs.push_back(Output{"token losses", to_float_vector(glosses.to(Device::cpu())), values(losses_ref),
                                   dtype == kF32 ? kF32Bound : Bound{2e-2, 2e-2}});
        }
        if (dtype == kF32) {
          outputs.push_back(compare_scalar("loss_sum", got.loss_sum, ref.loss_sum, kF32Bound));
        } else {
          // BF16 logits move each token's loss by at most ~2^-7 |logit|: an absolute bound per token.
          const double per_token =
              std::fabs(got.loss_sum - ref.loss_sum) / static_cast<double>(std::max<int64_t>(ref.tokens, 1));
          outputs.push_back(compare_scalar("loss_sum per token", per_token, 0.0, Bound{2e-2, 2e-2}));
        }
        outputs.push_back(compare_scalar("tokens", static_cast<double>(got.tokens), static_cast<double>(ref.tokens),
                                         Bound{1e-30, 0.0}));
        // Near-ties of the top two logits may flip under BF16 rounding: a few percent of the rows.
        const double allowed = dtype == kF32 ? 1.0 : 1.0 + 0.1 * static_cast<double>(ref.tokens);
        const double correct_diff = std::fabs(static_cast<double>(got.correct - ref.correct));
        outputs.push_back(Output{"correct",
                                 {correct_diff <= allowed ? 0.f : static_cast<float>(correct_diff)},
                                 {0.f},
                                 Bound{1e-30, 0.0},
                                 0});
        if (dhidden) outputs.push_back(compare_view("dhidden", gdh, dh_ref, bound_for(dtype)));
        if (dweight) outputs.push_back(compare_view("dweight", gdw, dw_ref, bound_for(dtype)));
        return outputs;
      }};
}

// ---- the table --------------------------------------------------------------------------------------------------

// ---- fused lm_head + distillation -------------------------------------------------------------------------------

// The outputs both distillation forms compare: the three sums (BF16: per token, an absolute bound), the token count,
// the argmax counts (a few BF16 near-ties may flip) and the gradients asked for.
std::vector<Output> distillation_outputs(const DistillationResult& got, const DistillationResult& ref, DType dtype,
                                         const DeviceView* gdh, const Tensor& dh_ref, const DeviceView* gdw,
                                         const Tensor& dw_ref) {
  std::vector<Output> outputs;
  const double tokens = static_cast<double>(std::max<int64_t>(ref.tokens, 1));
  for (const auto& [name, g, r] :
       {std::tuple{"loss_sum", got.loss_sum, ref.loss_sum}, std::tuple{"kl_sum", got.kl_sum, ref.kl_sum},
        std::tuple{"ce_sum", got.ce_sum, ref.ce_sum}}) {
    if (dtype == kF32) {
      outputs.push_back(compare_scalar(name, g, r, kF32Bound));
    } else {
      // BF16 logits move each token's terms by at most ~2^-7 |logit|: an absolute bound per token.
      outputs.push_back(
          compare_scalar(fmt::format("{} per token", name), std::fabs(g - r) / tokens, 0.0, Bound{2e-2, 2e-2}));
    }
  }
  outputs.push_back(
      compare_scalar("tokens", static_cast<double>(got.tokens), static_cast<double>(ref.tokens), Bound{1e-30, 0.0}));
  // Near-ties of the top two logits may flip under BF16 rounding: a few percent of the rows.
  const double allowed = dtype == kF32 ? 1.0 : 1.0 + 0.1 * static_cast<double>(ref.tokens);
  for (const auto& [name, g, r] :
       {std::tuple{"correct", got.correct, ref.correct}, std::tuple{"agree", got.agree, ref.agree}}) {
    const double diff = std::fabs(static_cast<double>(g - r));
    outputs.push_back(Output{name, {diff <= allowed ? 0.f : static_cast<float>(diff)}, {0.f}, Bound{1e-30, 0.0}, 0});
  }
  // The KL gradient is a difference of two near-equal distributions, q - p: BF16 logits (both rounded to 8 bits) move
  // it by ~2^-8 of each logit, relatively more than they move cross-entropy's softmax - onehot.
  const Bound gradient_bound = dtype == kF32 ? kF32Bound : Bound{3e-2, 5e-2};
  if (gdh != nullptr) outputs.push_back(compare_view("dhidden", *gdh, dh_ref, gradient_bound));
  if (gdw != nullptr) outputs.push_back(compare_view("dweight", *gdw, dw_ref, gradient_bound));
  return outputs;
}

// A teacher wider than the student (Ht = H + 32) whose logits are the student's plus noise, so KL, agreement and the
// gradient are all non-trivial; half the targets the student's argmax.
Case distillation_case(int64_t rows, int64_t hidden_dim, int64_t vocab, DType dtype, Ignore ignore,
                       DistillationSettings settings, bool dhidden, bool dweight, int64_t budget_rows = 0) {
  const char* ignore_name = ignore == Ignore::None ? "none" : (ignore == Ignore::Some ? "some" : "all");
  return {"lm_head_distillation",
          fmt::format("N={} H={} V={} {} ignored={} tau={} weight={}{}{}{}", rows, hidden_dim, vocab, dtype_str(dtype),
                      ignore_name, settings.temperature, settings.weight, dhidden ? " +dhidden" : "",
                      dweight ? " +dweight" : "", budget_rows > 0 ? fmt::format(" {} rows/chunk", budget_rows) : ""),
          [=](Rng& rng) {
            const int64_t teacher_dim = hidden_dim + 32;
            const float head_scale = 0.5f / std::sqrt(static_cast<float>(hidden_dim));
            const Tensor h = round_to(random_normal({rows, hidden_dim}, rng), dtype);
            const Tensor w = round_to(random_normal({vocab, hidden_dim}, rng, head_scale), dtype);
            Tensor ht = random_normal({rows, teacher_dim}, rng, 0.3f),
                   wt = random_normal({vocab, teacher_dim}, rng, 0.3f * head_scale);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < hidden_dim; ++j)
                ht.data<float>()[i * teacher_dim + j] += h.data<float>()[i * hidden_dim + j];
            for (int64_t v = 0; v < vocab; ++v)
              for (int64_t j = 0; j < hidden_dim; ++j)
                wt.data<float>()[v * teacher_dim + j] += w.data<float>()[v * hidden_dim + j];
            ht = round_to(ht, dtype);
            wt = round_to(wt, dtype);
            Tensor logits = Tensor::empty({rows, vocab}, kF32);
            gemm(h, false, w, true, logits);
            std::vector<int32_t> targets(static_cast<size_t>(rows));
            const float* z = logits.data<float>();
            for (int64_t i = 0; i < rows; ++i) {
              int32_t& t = targets[static_cast<size_t>(i)];
              if (ignore == Ignore::All || (ignore == Ignore::Some && i % 3 == 1)) {
                t = kIgnoreIndex;
              } else if (i % 2 == 0) {
                t = static_cast<int32_t>(std::max_element(z + i * vocab, z + (i + 1) * vocab) - (z + i * vocab));
              } else {
                t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
              }
            }
            const Tensor target = Tensor::from_ints(targets, {rows});
            const float grad_scale = 1.f / static_cast<float>(std::max<int64_t>(rows, 1));
            const Tensor dw0 = random_normal({vocab, hidden_dim}, rng, grad_scale);
            Tensor dh_ref = Tensor::empty({rows, hidden_dim}, kF32), dw_ref = dw0.clone();
            const DistillationResult ref = lm_head_distillation(
                h, w, ht, wt, target, settings, grad_scale, dhidden ? &dh_ref : nullptr, dweight ? &dw_ref : nullptr);

            const DeviceView gh = upload_view(h, dtype, 0, 0);
            const Tensor gw = upload(w, dtype), ght = upload(ht, dtype), gwt = upload(wt, dtype);
            DeviceView gdh = poisoned({rows, hidden_dim}, dtype, 0, 0);
            DeviceView gdw = upload_view(dw0, kF32);
            DistillationResult got;
            {
              const LogitsBudget budget(2 * budget_rows * cuda::cross_entropy_logits_ld(vocab) *
                                        static_cast<int64_t>(dtype_bytes(dtype)));
              got = lm_head_distillation(gh.view, gw, ght, gwt, target.to(gpu()), settings, grad_scale,
                                         dhidden ? &gdh.view : nullptr, dweight ? &gdw.view : nullptr);
            }
            return distillation_outputs(got, ref, dtype, dhidden ? &gdh : nullptr, dh_ref, dweight ? &gdw : nullptr,
                                        dw_ref);
          }};
}

// Against a teacher's top K (a teacher cache): the teacher's logits the student's plus noise, so the top K carry most
// but not all of its mass; K from 1 to the kernel's limit and the whole vocabulary (nothing left outside).
Case distillation_topk_case(int64_t rows, int64_t hidden_dim, int64_t vocab, int64_t k, DType dtype, Ignore ignore,
                            DistillationSettings settings, bool dhidden, bool dweight, int64_t budget_rows = 0) {
  const char* ignore_name = ignore == Ignore::None ? "none" : (ignore == Ignore::Some ? "some" : "all");
  return {"lm_head_distillation_topk",
          fmt::format("N={} H={} V={} K={} {} ignored={} tau={} weight={}{}{}{}", rows, hidden_dim, vocab, k,
                      dtype_str(dtype), ignore_name, settings.temperature, settings.weight, dhidden ? " +dhidden" : "",
                      dweight ? " +dweight" : "", budget_rows > 0 ? fmt::format(" {} rows/chunk", budget_rows) : ""),
          [=](Rng& rng) {
            const float head_scale = 0.5f / std::sqrt(static_cast<float>(hidden_dim));
            const Tensor h = round_to(random_normal({rows, hidden_dim}, rng), dtype);
            const Tensor w = round_to(random_normal({vocab, hidden_dim}, rng, head_scale), dtype);
            Tensor logits = Tensor::empty({rows, vocab}, kF32);
            gemm(h, false, w, true, logits);
            std::vector<int32_t> targets(static_cast<size_t>(rows));
            std::vector<int64_t> trained;
            const float* z = logits.data<float>();
            for (int64_t i = 0; i < rows; ++i) {
              int32_t& t = targets[static_cast<size_t>(i)];
              if (ignore == Ignore::All || (ignore == Ignore::Some && i % 3 == 1)) {
                t = kIgnoreIndex;
                continue;
              }
              t = i % 2 == 0
                      ? static_cast<int32_t>(std::max_element(z + i * vocab, z + (i + 1) * vocab) - (z + i * vocab))
                      : static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
              trained.push_back(i);
            }
            const auto m = static_cast<int64_t>(trained.size());
            Tensor teacher_logits = random_normal({std::max<int64_t>(m, 1), vocab}, rng, 0.7f);
            for (int64_t r = 0; r < m; ++r)
              for (int64_t v = 0; v < vocab; ++v)
                teacher_logits.data<float>()[r * vocab + v] += z[trained[static_cast<size_t>(r)] * vocab + v];
            TeacherTopK top = select_teacher_top_k(teacher_logits, k, settings.temperature);
            if (m == 0) top = {top.ids.narrow(0, 0, 0), top.log_probs.narrow(0, 0, 0), top.log_rest.narrow(0, 0, 0)};
            const Tensor target = Tensor::from_ints(targets, {rows});
            const float grad_scale = 1.f / static_cast<float>(std::max<int64_t>(rows, 1));
            const Tensor dw0 = random_normal({vocab, hidden_dim}, rng, grad_scale);
            Tensor dh_ref = Tensor::empty({rows, hidden_dim}, kF32), dw_ref = dw0.clone();
            const DistillationResult ref = lm_head_distillation_topk(
                h, w, top, target, settings, grad_scale, dhidden ? &dh_ref : nullptr, dweight ? &dw_ref : nullptr);

            const DeviceView gh = upload_view(h, dtype, 0, 0);
            const Tensor gw = upload(w, dtype);
            DeviceView gdh = poisoned({rows, hidden_dim}, dtype, 0, 0);
            DeviceView gdw = upload_view(dw0, kF32);
            DistillationResult got;
            {
              const LogitsBudget budget(budget_rows * cuda::cross_entropy_logits_ld(vocab) *
                                        static_cast<int64_t>(dtype_bytes(dtype)));
              got = lm_head_distillation_topk(gh.view, gw, top.to(gpu()), target.to(gpu()), settings, grad_scale,
                                              dhidden ? &gdh.view : nullptr, dweight ? &gdw.view : nullptr);
            }
            return distillation_outputs(got, ref, dtype, dhidden ? &gdh : nullptr, dh_ref, dweight ? &gdw : nullptr,
                                        dw_ref);
          }};
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  // gemm: odd sizes, all transposes, every dtype pair, alpha / beta, views (odd offsets break alignment).
  for (DType ab : {kBF16, kF32}) {
    for (DType c : {kBF16, kF32}) {
      if (ab == kF32 && c != kF32) continue;
      cases.push_back(gemm_case(1, 64, 128, false, true, ab, c, 1.f, 0.f));
      cases.push_back(gemm_case(3, 128, 17, false, false, ab, c, 1.f, 0.f));
      cases.push_back(gemm_case(17, 2560, 64, true, false, ab, c, 0.5f, 1.f));
      cases.push_back(gemm_case(129, 64, 2560, true, true, ab, c, 1.f, 1.f));
      cases.push_back(gemm_case(33, 128, 129, false, true, ab, c, 1.f, 0.f, 8, 0));
      cases.push_back(gemm_case(17, 64, 40, false, true, ab, c, 1.f, 1.f, 5, 1));
    }
  }
  cases.push_back(gemm_case(5, 0, 7, false, false, kF32, kF32, 1.f, 0.5f));  // K = 0: C = beta * C
  cases.push_back(gemm_case(5, 0, 7, false, false, kBF16, kBF16, 1.f, 0.f));
  cases.push_back(linear_backward_weight_case(129, 64, 128, kBF16));
  cases.push_back(linear_backward_weight_case(3, 2560, 17, kBF16));
  cases.push_back(linear_backward_weight_case(17, 128, 64, kF32));
  cases.push_back(lm_head_logits_case(1, 128, 1003));
  cases.push_back(lm_head_logits_case(3, 2560, 4096));

  // elementwise
  for (DType dtype : {kF32, kBF16}) {
    cases.push_back(add_case(1, 64, dtype, 0, 0, false));
    cases.push_back(add_case(3, 17, dtype, 0, 0, false));
    cases.push_back(add_case(17, 2560, dtype, 8, 0, false));
    cases.push_back(add_case(129, 128, dtype, 3, 1, false));
    cases.push_back(add_case(17, 2560, dtype, 0, 0, true));
    cases.push_back(add_case(3, 129, dtype, 2, 1, true));
    cases.push_back(mul_case(17, 2560, dtype, 0, 0));  // dense: one flat run
    cases.push_back(mul_case(3, 129, dtype, 2, 1));    // row-strided views, a tail chunk
    cases.push_back(scale_case(17, 2560, dtype, 0));
    cases.push_back(scale_case(3, 17, dtype, 5));
    cases.push_back(sum_squares_case(1, (1 << 20) + 3, dtype, 0));
    cases.push_back(sum_squares_case(129, 2560, dtype, 0));
    cases.push_back(sum_squares_case(17, 63, dtype, 9));
    cases.push_back(dropout_case(17, 2560, dtype, 0, 0, false));  // dense: one flat run
    cases.push_back(dropout_case(3, 17, dtype, 5, 1, false));     // row-strided view, a tail chunk
    cases.push_back(dropout_case(129, 128, dtype, 8, 0, true));
    cases.push_back(dropout_case(5, 33, dtype, 0, 0, true));
  }
  for (DType dtype : {kF32, kBF16, DType::F16}) {
    cases.push_back(fill_case(3, 17, dtype, 0, 0));
    cases.push_back(fill_case(129, 128, dtype, 8, 1));
  }
  for (DType from : {kF32, kBF16, DType::F16}) {
    for (DType to : {kF32, kBF16, DType::F16}) {
      cases.push_back(cast_case(17, 2560, from, to, 0, 0));
      cases.push_back(cast_case(3, 17, from, to, 4, 1));
    }
  }

  // embedding
  for (DType table : {kF32, kBF16}) {
    for (DType out : {kF32, kBF16}) {
      cases.push_back(embedding_forward_case(1, 17, 64, table, out, 0));
      cases.push_back(embedding_forward_case(129, 1000, 2560, table, out, 0));
      cases.push_back(embedding_forward_case(17, 1000, 129, table, out, 3));
    }
  }
  for (DType dout : {kF32, kBF16}) {
    cases.push_back(embedding_backward_case(1, 17, 17, 64, dout, 0));
    cases.push_back(embedding_backward_case(129, 1000, 5, 2560, dout, 0));  // many repeated ids
    cases.push_back(embedding_backward_case(3, 1000, 1000, 128, dout, 0));
    cases.push_back(embedding_backward_case(17, 100, 7, 129, dout, 3));
  }

  // KV-cache writes (decode: one token a row; chunked prefill; unaligned rows)
  for (DType dtype : {kF32, kBF16}) {
    cases.push_back(store_kv_rows_case(1, 1, 4096, 8, 128, dtype));
    cases.push_back(store_kv_rows_case(3, 5, 40, 2, 64, dtype));
    cases.push_back(store_kv_rows_case(2, 3, 7, 3, 17, dtype));
  }

  // rmsnorm (hidden rows and per-head QK-norm)
  for (DType dtype : {kF32, kBF16}) {
    cases.push_back(rmsnorm_forward_case(1, 2560, dtype, 0, false));
    cases.push_back(rmsnorm_forward_case(3, 128, dtype, 0, false));
    cases.push_back(rmsnorm_forward_case(17, 64, dtype, 0, true));
    cases.push_back(rmsnorm_forward_case(129, 2560, dtype, 8, false));
    cases.push_back(rmsnorm_forward_case(33, 17, dtype, 3, false));
    cases.push_back(rmsnorm_backward_case(1, 2560, dtype, 0, false));
    cases.push_back(rmsnorm_backward_case(3, 128, dtype, 0, true));
    cases.push_back(rmsnorm_backward_case(129, 2560, dtype, 8, false));
    cases.push_back(rmsnorm_backward_case(4099, 128, dtype, 0, false));  // many blocks in the dweight reduction
    cases.push_back(rmsnorm_backward_case(33, 17, dtype, 3, true));
    cases.push_back(rmsnorm_heads_case(17, 4, 2, 128, dtype));
    cases.push_back(rmsnorm_heads_case(3, 3, 1, 64, dtype));
  }

  // rope
  for (DType dtype : {kF32, kBF16}) {
    for (bool inverse : {false, true}) {
      cases.push_back(rope_case(1, 1, 1, 0, 64, dtype, inverse));
      cases.push_back(rope_case(1, 17, 8, 0, 128, dtype, inverse));
      cases.push_back(rope_case(2, 129, 4, 2, 128, dtype, inverse));
      cases.push_back(rope_case(1, 3, 3, 1, 18, dtype, inverse));  // half = 9: unvectorised
    }
    cases.push_back(rope_theta_case(17, 2, 128, dtype));
  }

  // swiglu
  for (DType dtype : {kF32, kBF16}) {
    for (bool backward : {false, true}) {
      cases.push_back(swiglu_case(1, 64, dtype, backward, false));
      cases.push_back(swiglu_case(3, 17, dtype, backward, false));
      cases.push_back(swiglu_case(17, 2560, dtype, backward, false));
      cases.push_back(swiglu_case(129, 128, dtype, backward, false));
    }
    cases.push_back(swiglu_case(17, 2560, dtype, true, true));
    cases.push_back(swiglu_case(3, 17, dtype, true, true));
  }

  // fused lm_head + cross-entropy
  for (DType dtype : {kF32, kBF16}) {
    cases.push_back(cross_entropy_case(1, 64, 17, dtype, Ignore::None, true, true));
    cases.push_back(cross_entropy_case(17, 128, 1003, dtype, Ignore::Some, true, true));
    cases.push_back(cross_entropy_case(129, 128, 4099, dtype, Ignore::None, true, true, 0, 8));
    cases.push_back(cross_entropy_case(129, 64, 1000, dtype, Ignore::Some, true, true, 7));  // 7 rows per chunk
    cases.push_back(cross_entropy_case(33, 64, 1000, dtype, Ignore::Some, true, false, 10));
    cases.push_back(cross_entropy_case(33, 64, 1000, dtype, Ignore::None, false, true, 10));
    cases.push_back(cross_entropy_case(17, 64, 1000, dtype, Ignore::Some, false, false));
    cases.push_back(cross_entropy_case(129, 64, 1000, dtype, Ignore::Some, true, true, 7, 0, true));
    cases.push_back(cross_entropy_case(17, 128, 1003, dtype, Ignore::None, true, true, 0, 0, true));
    cases.push_back(cross_entropy_case(5, 64, 100, dtype, Ignore::All, true, true));
  }

  // fused lm_head + distillation
  for (DType dtype : {kF32, kBF16}) {
    cases.push_back(distillation_case(1, 64, 17, dtype, Ignore::None, {1.0f, 1.0f}, true, true));
    cases.push_back(distillation_case(17, 128, 1003, dtype, Ignore::Some, {2.0f, 1.0f}, true, true));
    cases.push_back(distillation_case(129, 64, 1000, dtype, Ignore::Some, {1.0f, 0.5f}, true, true, 7));
    cases.push_back(distillation_case(33, 64, 4099, dtype, Ignore::None, {1.5f, 0.8f}, true, false, 10));
    cases.push_back(distillation_case(33, 64, 1000, dtype, Ignore::Some, {1.0f, 0.0f}, false, true));
    cases.push_back(distillation_case(17, 64, 1000, dtype, Ignore::None, {2.0f, 1.0f}, false, false));
    cases.push_back(distillation_case(5, 64, 100, dtype, Ignore::All, {1.0f, 1.0f}, true, true));
    cases.push_back(distillation_topk_case(1, 64, 17, 17, dtype, Ignore::None, {1.0f, 1.0f}, true, true));
    cases.push_back(distillation_topk_case(17, 128, 1003, 8, dtype, Ignore::Some, {2.0f, 1.0f}, true, true));
    cases.push_back(distillation_topk_case(129, 64, 1000, 1, dtype, Ignore::Some, {1.0f, 0.5f}, true, true, 7));
    cases.push_back(distillation_topk_case(33, 64, 4099, 256, dtype, Ignore::None, {1.5f, 0.8f}, true, false, 10));
    cases.push_back(distillation_topk_case(17, 64, 1000, 32, dtype, Ignore::None, {2.0f, 1.0f}, false, false));
    cases.push_back(distillation_topk_case(5, 64, 100, 4, dtype, Ignore::All, {1.0f, 1.0f}, true, true));
  }
  return cases;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const Case& c : all_cases())
    if (std::find(names.begin(), names.end(), c.op) == names.end()) names.push_back(c.op);
  return names;
}

class BackendOps : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendOps, CudaMatchesCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const std::string& op = GetParam();
  int total = 0, passed = 0;
  double worst = 0;
  uint64_t seed = 1000;
  for (const Case& c : all_cases()) {
    if (c.op != op) continue;
    ++total;
    Rng rng(seed++);
    bool ok = true;
    try {
      for (const Output& out : c.run(rng)) {
        const Measure m = measure(out);
        worst = std::max(worst, m.rel_l2);
        if (!m.ok) {
          ok = false;
          ADD_FAILURE() << op << " [" << c.params << "] output " << out.name << ": rel L2 error " << m.rel_l2
                        << " (bound " << out.bound.rel_l2 << "), max abs error " << m.max_abs << " (bound "
                        << out.bound.max_abs_rel << " x max|ref| " << m.max_ref << "), " << m.bad_nan
                        << " unwritten/NaN elements, " << out.padding_written << " padding elements written, "
                        << out.actual.size() << " vs " << out.expected.size() << " elements";
        }
      }
    } catch (const std::exception& e) {
      ok = false;
      ADD_FAILURE() << op << " [" << c.params << "] threw: " << e.what();
    }
    passed += ok ? 1 : 0;
  }
  std::printf("%s: %d/%d OK, worst rel err %.1e\n", op.c_str(), passed, total, worst);
  EXPECT_GT(total, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, BackendOps, ::testing::ValuesIn(op_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace nvfp4lm::test::backend::test_backend_ops
