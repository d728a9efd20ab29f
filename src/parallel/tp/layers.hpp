// Column- and row-parallel linear layers (Megatron-LM, Shoeybi et al. 2019):
// a column-parallel layer holds rows [r*out/tp, (r+1)*out/tp) of W (out, in),
// i.e. a slice of the output features; a row-parallel layer holds columns
// [r*in/tp, (r+1)*in/tp), a slice of the input features, so its products
// are partial sums that leave the tp region through TpRegions::leave_fwd.
#pragma once

#include <initializer_list>
#include <vector>

#include "backend/backend.hpp"
#include "model/params.hpp"
#include "parallel/tp/regions.hpp"

namespace pentad {

class ColumnParallelGroup;

// y = x W^T + b on N token rows. The input region is entered by the caller
// (Q, K and V share one all-gather, as do the MLP's gate and up matrices).
class ColumnParallelLinear {
 public:
  ColumnParallelLinear() = default;  // not held on this rank
  // w: (out/tp, in); b: (out/tp) or none; tp: the regions the layer's
  // input comes from (its N rows). Local.
  ColumnParallelLinear(ParamStore& params, Backend& be, const TpRegions& tp, ParamId w, ParamId b,
                       int n_out_local, int n_in);

  int n_out_local() const { return n_out_; }
  ParamId weight() const { return w_; }
  ParamId bias() const { return b_; }

  // y (N, out/tp) = x (N, in) W^T + b; x is all rows (after enter_fwd);
  // with act non-null also act = GELU(y) (GPT-2's MLP). One backend
  // linear_fwd: on CUDA the bias and GELU run in the GEMM's epilogue. Local.
  void fwd(float* y, const float* x, float* act = nullptr) const;
  // dx (N, in) = dy W + dx_beta * dx: this rank's share of the input gradient,
  // a partial sum over its output features until enter_bwd; dW += dy^T x;
  // db += column sums of dy. dy: (N, out/tp). Local.
  void bwd(float* dx, const float* dy, const float* x, float dx_beta) const;
  // bwd in two halves (zero-bubble schedules: B now, W later): the input
  // gradient alone, and the weight and bias gradients alone. Local.
  void bwd_input(float* dx, const float* dy, float dx_beta) const;
  void bwd_weight(const float* dy, const float* x) const;

 private:
  friend class ColumnParallelGroup;  // builds the backend's group parts from the layers
  ParamStore* params_ = nullptr;
  Backend* be_ = nullptr;
  const TpRegions* tp_ = nullptr;
  ParamId w_, b_;
  int n_out_ = 0, n_in_ = 0;
};

// Column-parallel layers on one input (Q, K and V): each method is one
// backend group op over the layers (linear_fwd_group and its gradients), the
// result of the layers' own methods in turn. The layers' weights (and their
// gradients) lie one after another in the parameter buffers, and the model's
// outputs in its activation plan, so on CUDA each is one GEMM (or, for the
// forward with grouped-query heads, one per shape).
class ColumnParallelGroup {
 public:
  ColumnParallelGroup() = default;
  explicit ColumnParallelGroup(std::vector<ColumnParallelLinear> layers) : layers_(std::move(layers)) {}

  const ColumnParallelLinear& layer(size_t i) const { return layers_[i]; }
  size_t size() const { return layers_.size(); }

  // ys[i] (N, out_i/tp) = x (N, in) W_i^T + b_i. Local.
  void fwd(std::initializer_list<float*> ys, const float* x) const;
  // dx (N, in) = sum_i dys[i] W_i + dx_beta * dx. Local.
  void bwd_input(float* dx, std::initializer_list<const float*> dys, float dx_beta) const;
  // dW_i += dys[i]^T x; db_i += column sums of dys[i]. Local.
  void bwd_weight(std::initializer_list<const float*> dys, const float* x) const;
  // bwd_input, then bwd_weight. Local.
  void bwd(float* dx, std::initializer_list<const float*> dys, const float* x, float dx_beta) const;

 private:
  std::vector<LinearGradPart> grad_parts(std::initializer_list<const float*> dys) const;
  std::vector<ColumnParallelLinear> layers_;
};

// out = resid + (x W^T summed over tp) + b: the last layer of a tp region
// fused with the residual add. The bias is replicated and added once, after
// the reduction, on this rank's rows.
class RowParallelLinear {
 public:
  RowParallelLinear() = default;  // not held on this rank
  // w: (out, in/tp); b: (out) or none. Local.
  RowParallelLinear(ParamStore& params, Backend& be, const TpRegions& tp, ParamId w, ParamId b, int n_out,
                    int n_in_local);

  ParamId weight() const { return w_; }
  ParamId bias() const { return b_; }

  // out (Nl, out) = resid (Nl, out) + leave(x (N, in/tp) W^T) + b; part:
  // (N, out) scratch for the partial sums (tp > 1). Without tp the serial
  // order: out = resid, then out += x W^T, then the bias. Collective over tp.
  void fwd(float* out, const float* resid, const float* x, float* part) const;
  // dx (N, in/tp) = dy W; dW += dy^T x; db += column sums of dy. dy: all
  // rows (N, out) (after leave_bwd), so db is the same on every tp rank. Local.
  void bwd(float* dx, const float* dy, const float* x) const;
  // bwd's two halves, as ColumnParallelLinear's. Local.
  void bwd_input(float* dx, const float* dy) const;
  void bwd_weight(const float* dy, const float* x) const;
  // bwd_input through the GELU that made this layer's input (GPT-2's MLP):
  // dx (N, in/tp) = GELU'(gelu_in) * (dy W), gelu_in (N, in/tp) the GELU's
  // input (backend op linear_bwd_input_gelu). Local.
  void bwd_input_gelu(float* dx, const float* dy, const float* gelu_in) const;

 private:
  ParamStore* params_ = nullptr;
  Backend* be_ = nullptr;
  const TpRegions* tp_ = nullptr;
  ParamId w_, b_;
  int n_out_ = 0, n_in_ = 0;
};

}  // namespace pentad
