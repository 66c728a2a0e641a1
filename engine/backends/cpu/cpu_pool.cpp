// pool2d on oneDNN: max and average pooling, forward and backward (plain nchw). Max pooling
// keeps oneDNN's workspace as its record for backward.
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

struct PoolGeom {
  int64_t n, c, h, w, p, q;
};

const char* pool_kind_name(PoolKind kind) {
  switch (kind) {
    case PoolKind::max: return "max";
    case PoolKind::avg: return "avg";
  }
  throw InternalError("unknown pool kind");
}

algorithm pool_algorithm(PoolKind kind) {
  switch (kind) {
    case PoolKind::max: return algorithm::pooling_max;
    case PoolKind::avg: return algorithm::pooling_avg_exclude_padding;  // PyTorch's default
  }
  throw InternalError("unknown pool kind");
}

std::string pool_str(const Pool2dParams& p) {
  return std::string(pool_kind_name(p.kind)) + " kernel (" +
         std::to_string(p.kernel_h) + ", " + std::to_string(p.kernel_w) + "), stride (" +
         std::to_string(p.stride_h) + ", " + std::to_string(p.stride_w) + "), pad (" +
         std::to_string(p.pad_h) + ", " + std::to_string(p.pad_w) + ")";
}

// What oneDNN needs beyond check_pool2d_*: non-empty tensors and a window that fits the
// padded input (pool2d_output_shape rounds a negative span toward zero, like the conv formula;
// at stride 1 it is exact). x (N, C, H, W), y (N, C, P, Q), already checked. The messages are
// built only on failure: this runs on every call.
PoolGeom pool_geom(const char* op, const Pool2dParams& p, const Tensor& x, const Tensor& y) {
  const OpCheck c(op, Device::cpu());
  // Every window then holds at least one real element (the average's divisor is never 0).
  if (p.pad_h >= p.kernel_h || p.pad_w >= p.kernel_w)
    c.fail("padding must be smaller than the kernel, got " + pool_str(p));
  if (x.dim(0) < 1 || x.dim(1) < 1) c.fail("empty tensor: x " + describe(x));
  Pool2dParams unit = p;
  unit.stride_h = unit.stride_w = 1;
  const Shape sweep = pool2d_output_shape(unit, x.shape());
  if (sweep[2] < 1 || sweep[3] < 1)
    c.fail("the window does not fit the padded input " + describe(x) + ", " + pool_str(p));
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3)};
}

struct PoolDescs {
  Md x, y;  // x (N, C, H, W), y (N, C, P, Q)
  Dims strides, kernel, pad_l, pad_r;
  algorithm alg;
};

PoolDescs pool_descs(const PoolGeom& g, const Pool2dParams& p) {
  PoolDescs d;
  d.x = f32_md({g.n, g.c, g.h, g.w}, Tag::nchw);
  d.y = f32_md({g.n, g.c, g.p, g.q}, Tag::nchw);
  d.strides = {p.stride_h, p.stride_w};
  d.kernel = {p.kernel_h, p.kernel_w};
  d.pad_l = {p.pad_h, p.pad_w};
  d.pad_r = {p.pad_h, p.pad_w};
  d.alg = pool_algorithm(p.kind);
  return d;
}

std::string pool_key(const char* op, const PoolGeom& g, const Pool2dParams& p, bool training) {
  return key_of(op, {static_cast<int64_t>(p.kind), training ? 1 : 0, g.n, g.c, g.h, g.w, g.p, g.q,
                     p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w});
}

dnnl::pooling_forward::primitive_desc pool_forward_pd(const dnnl::engine& eng, const PoolDescs& d,
                                                      bool training) {
  return onednn::pool_forward_pd(eng,
                                 training ? prop_kind::forward_training
                                          : prop_kind::forward_inference,
                                 d.alg, d.x, d.y, d.strides, d.kernel, d.pad_l, d.pad_r);
}

}  // namespace

void CpuOps::pool2d_forward(const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& workspace,
                            bool training) {
  constexpr const char* op = "pool2d_forward";
  check_pool2d_forward(p, x, y, Device::cpu());
  require_supported(OpKind::pool2d_forward, {{x, "x"}, {y, "y"}});
  const PoolGeom g = pool_geom(op, p, x, y);
  const PoolDescs d = pool_descs(g, p);
  // Only max pooling keeps a record for backward; average pooling's backward needs none.
  const bool keep = training && p.kind == PoolKind::max;
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", " + pool_str(p); },
      [&] {
        const Cached& c = cached(pool_key(op, g, p, keep), [&] {
          const auto pd = pool_forward_pd(engine_, d, keep);
          if (!keep) return Cached{dnnl::pooling_forward(pd)};
          return Cached{dnnl::pooling_forward(pd), pd.workspace_desc(),
                        onednn::md_bytes(pd.workspace_desc())};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.x, x)},
                                                   {DNNL_ARG_DST, wrap(d.y, y)}};
        if (c.workspace_bytes > 0) {
          const int64_t bytes = static_cast<int64_t>(c.workspace_bytes);
          if (!workspace.defined() || workspace.dtype() != DType::u8 ||
              workspace.shape() != Shape{bytes} || !workspace.device().is_cpu())
            workspace = Tensor(Shape{bytes}, DType::u8, cpu_allocator());
          args.emplace(DNNL_ARG_WORKSPACE, dnnl::memory(c.workspace_md, engine_, workspace.raw()));
        }
        execute(c, args);
      });
}

void CpuOps::pool2d_rebuild_workspace(const Pool2dParams& p, const Tensor& x,
                                      const Shape& y_shape, Tensor& workspace) {
  Tensor y(y_shape, DType::f32, cpu_allocator());
  pool2d_forward(p, x, y, workspace, /*training=*/true);
}

void CpuOps::pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y,
                             const Tensor& dy, const Tensor& workspace, Tensor& dx) {
  constexpr const char* op = "pool2d_backward";
  check_pool2d_backward(p, x, y, dy, dx, Device::cpu());
  require_supported(OpKind::pool2d_backward, {{x, "x"}, {y, "y"}, {dy, "dy"}, {dx, "dx"}});
  const PoolGeom g = pool_geom(op, p, x, dy);
  const PoolDescs d = pool_descs(g, p);
  const bool is_max = p.kind == PoolKind::max;
  guarded(
      op, [&] { return "dy " + shape_str(dy.shape()) + ", dx " + shape_str(dx.shape()) + ", " + pool_str(p); },
      [&] {
        Tensor ws = workspace;
        Md ws_md;
        if (is_max) {
          // The workspace must come from a training forward of this very shape; when the
          // caller kept none (e.g. the forward ran in inference mode), recompute it from x.
          const Cached& fwd = cached(pool_key("pool2d_forward", g, p, true), [&] {
            const auto pd = pool_forward_pd(engine_, d, true);
            return Cached{dnnl::pooling_forward(pd), pd.workspace_desc(),
                          onednn::md_bytes(pd.workspace_desc())};
          });
          ws_md = fwd.workspace_md;
          const bool usable = ws.defined() && ws.dtype() == DType::u8 && ws.device().is_cpu() &&
                              ws.nbytes() == fwd.workspace_bytes;
          if (!usable) {
            ws = Tensor();
            pool2d_rebuild_workspace(p, x, dy.shape(), ws);
          }
        }
        const Cached& c = cached(pool_key(op, g, p, true), [&] {
          const auto hint = pool_forward_pd(engine_, d, true);
          return Cached{dnnl::pooling_backward(onednn::pool_backward_pd(
              engine_, d.alg, d.x, d.y, d.strides, d.kernel, d.pad_l, d.pad_r, hint))};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                                                   {DNNL_ARG_DIFF_SRC, wrap(d.x, dx)}};
        if (is_max) args.emplace(DNNL_ARG_WORKSPACE, dnnl::memory(ws_md, engine_, ws.raw()));
        execute(c, args);
      });
}

}  // namespace convoy::cpu
