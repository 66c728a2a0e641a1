// fmnet's convolutions (3x3, pad 1) timed in oneDNN's forward inference with nchw, nhwc and
// oneDNN's own (blocked) activation formats; weights plain oihw for nchw, oneDNN's choice
// otherwise. A measurement for planning the CPU path's layout, not part of the build:
//   g++ -O2 -std=c++17 benchmarks/cpu/onednn_conv_layouts.cpp -ldnnl -o /tmp/conv_layouts
//   OMP_NUM_THREADS=2 /tmp/conv_layouts          (oneDNN 2.x API, as in Debian 12)
// Plain ohwi weights with nhwc activations fall to oneDNN's reference kernel (1000x slower).
#include <oneapi/dnnl/dnnl.hpp>
#include <chrono>
#include <cstdio>
#include <vector>
using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;
struct S { int c, k, h; };
int main(int argc, char** argv) {
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  std::vector<S> shapes = {{1,32,28},{32,64,28},{64,64,14},{64,128,14},{128,128,7},{128,256,7},{256,256,3}};
  for (int n : {1, 64}) {
    double tot[3] = {0,0,0};
    for (auto s : shapes) {
      memory::dims src{n, s.c, s.h, s.h}, wei{s.k, s.c, 3, 3}, dst{n, s.k, s.h, s.h}, str{1,1}, pad{1,1};
      for (int v = 0; v < 3; ++v) {
        tag at = v == 0 ? tag::nchw : v == 1 ? tag::nhwc : tag::any;
        memory::desc smd(src, dt::f32, at), dmd(dst, dt::f32, at), wmd(wei, dt::f32, v == 0 ? tag::oihw : tag::any);
        convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, smd, wmd, dmd, str, pad, pad);
        convolution_forward::primitive_desc pd(d, eng);
        memory sm(pd.src_desc(), eng), wm(pd.weights_desc(), eng), dm(pd.dst_desc(), eng);
        convolution_forward conv(pd);
        for (int i = 0; i < 5; ++i) conv.execute(st, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm}});
        st.wait();
        int iters = n == 1 ? 400 : 20;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) conv.execute(st, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm}});
        st.wait();
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
        tot[v] += us;
        std::printf("n=%d %3d->%3d @%2d %-6s %9.1f us  impl %s\n", n, s.c, s.k, s.h, v==0?"nchw":v==1?"nhwc":"any", us, pd.impl_info_str());
      }
    }
    std::printf("n=%d total: nchw %.1f us, nhwc %.1f us, any %.1f us\n", n, tot[0], tot[1], tot[2]);
  }
}
