// The tp linear layers over the backend's GEMM: the same calls, in the same
// order, as the serial layer, so tp = 1 is bitwise the serial model.
#include "parallel/tp/layers.hpp"

#include <stdexcept>

namespace pentad {

namespace {

// y (n, n_out) = x (n, n_in) W^T + beta * y
void gemm_fwd(Backend& be, float* y, const float* x, const float* W, int n, int n_out, int n_in,
              float beta) {
  be.gemm(false, true, n, n_out, n_in, 1.0f, x, n_in, W, n_in, beta, y, n_out);
}

// dx (n, n_in) = dy W + dx_beta * dx: the group op's definition on one part
void gemm_bwd_input(Backend& be, float* dx, const float* dy, const float* W, int n, int n_out, int n_in,
                    float dx_beta) {
  const LinearGradPart part{dy, W, nullptr, nullptr, n_out};
  linear_bwd_input_each(be, dx, &part, 1, n, n_in, dx_beta);
}

// dW += dy^T x: likewise
void gemm_bwd_weight(Backend& be, float* dW, const float* dy, const float* x, int n, int n_out, int n_in) {
  const LinearGradPart part{dy, nullptr, dW, nullptr, n_out};
  linear_bwd_weight_each(be, &part, 1, x, n, n_in);
}

// Both, in this order (dx null: skipped). The split halves make the same
// calls, so B then W is bitwise this.
void gemm_bwd(Backend& be, float* dx, float* dW, const float* dy, const float* x, const float* W, int n,
              int n_out, int n_in, float dx_beta) {
  if (dx) gemm_bwd_input(be, dx, dy, W, n, n_out, n_in, dx_beta);
  gemm_bwd_weight(be, dW, dy, x, n, n_out, n_in);
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(ParamStore& params, Backend& be, const TpRegions& tp, ParamId w,
                                           ParamId b, int n_out_local, int n_in)
    : params_(&params), be_(&be), tp_(&tp), w_(w), b_(b), n_out_(n_out_local), n_in_(n_in) {}

void ColumnParallelLinear::fwd(float* y, const float* x, float* act) const {
  be_->linear_fwd(y, x, params_->param(w_), b_.held() ? params_->param(b_) : nullptr, tp_->n_rows(), n_out_,
                  n_in_, 0.0f, act);
}

void ColumnParallelLinear::bwd(float* dx, const float* dy, const float* x, float dx_beta) const {
  const int N = tp_->n_rows();
  gemm_bwd(*be_, dx, params_->grad(w_), dy, x, params_->param(w_), N, n_out_, n_in_, dx_beta);
  if (b_.held()) be_->bias_bwd(params_->grad(b_), dy, N, n_out_);
}

void ColumnParallelLinear::bwd_input(float* dx, const float* dy, float dx_beta) const {
  gemm_bwd_input(*be_, dx, dy, params_->param(w_), tp_->n_rows(), n_out_, n_in_, dx_beta);
}

void ColumnParallelLinear::bwd_weight(const float* dy, const float* x) const {
  const int N = tp_->n_rows();
  gemm_bwd_weight(*be_, params_->grad(w_), dy, x, N, n_out_, n_in_);
  if (b_.held()) be_->bias_bwd(params_->grad(b_), dy, N, n_out_);
}

void ColumnParallelGroup::fwd(std::initializer_list<float*> ys, const float* x) const {
  if (layers_.empty()) return;
  const ColumnParallelLinear& first = layers_.front();
  if (ys.size() != layers_.size()) throw std::logic_error("ColumnParallelGroup::fwd: one output per layer");
  std::vector<LinearPart> parts;
  size_t i = 0;
  for (float* y : ys) {
    const ColumnParallelLinear& l = layers_.at(i++);
    parts.push_back({y, l.params_->param(l.w_), l.b_.held() ? l.params_->param(l.b_) : nullptr, l.n_out_});
  }
  first.be_->linear_fwd_group(parts.data(), int(parts.size()), x, first.tp_->n_rows(), first.n_in_);
}

std::vector<LinearGradPart> ColumnParallelGroup::grad_parts(std::initializer_list<const float*> dys) const {
  if (dys.size() != layers_.size()) throw std::logic_error("ColumnParallelGroup: one gradient per layer");
  std::vector<LinearGradPart> parts;
  size_t i = 0;
  for (const float* dy : dys) {
    const ColumnParallelLinear& l = layers_.at(i++);
    parts.push_back({dy, l.params_->param(l.w_), l.params_->grad(l.w_),
                     l.b_.held() ? l.params_->grad(l.b_) : nullptr, l.n_out_});
  }
  return parts;
}

void ColumnParallelGroup::bwd_input(float* dx, std::initializer_list<const float*> dys, float dx_beta) const {
  if (layers_.empty()) return;
  const ColumnParallelLinear& first = layers_.front();
  const std::vector<LinearGradPart> parts = grad_parts(dys);
  first.be_->linear_bwd_input_group(dx, parts.data(), int(parts.size()), first.tp_->n_rows(), first.n_in_, dx_beta);
}

void ColumnParallelGroup::bwd_weight(std::initializer_list<const float*> dys, const float* x) const {
  if (layers_.empty()) return;
  const ColumnParallelLinear& first = layers_.front();
  const std::vector<LinearGradPart> parts = grad_parts(dys);
  first.be_->linear_bwd_weight_group(parts.data(), int(parts.size()), x, first.tp_->n_rows(), first.n_in_);
}

void ColumnParallelGroup::bwd(float* dx, std::initializer_list<const float*> dys, const float* x,
                              float dx_beta) const {
  bwd_input(dx, dys, dx_beta);
  bwd_weight(dys, x);
}

RowParallelLinear::RowParallelLinear(ParamStore& params, Backend& be, const TpRegions& tp, ParamId w,
                                     ParamId b, int n_out, int n_in_local)
    : params_(&params), be_(&be), tp_(&tp), w_(w), b_(b), n_out_(n_out), n_in_(n_in_local) {}

void RowParallelLinear::fwd(float* out, const float* resid, const float* x, float* part) const {
  const int N = tp_->n_rows(), Nl = tp_->n_rows_local();
  const size_t n_local = size_t(Nl) * n_out_;
  const float* W = params_->param(w_);
  if (!tp_->split()) {  // the serial order of operations
    be_->copy_bytes(out, resid, n_local * sizeof(float));
    be_->linear_fwd(out, x, W, b_.held() ? params_->param(b_) : nullptr, N, n_out_, n_in_, 1.0f, nullptr);
    return;
  }
  gemm_fwd(*be_, part, x, W, N, n_out_, n_in_, 0.0f);  // (N, out) partial sums over in/tp
  const float* sum = tp_->leave_fwd(part, out);
  be_->add(out, sum, resid, n_local);
  if (b_.held()) be_->bias_add(out, params_->param(b_), Nl, n_out_);
}

void RowParallelLinear::bwd(float* dx, const float* dy, const float* x) const {
  const int N = tp_->n_rows();
  gemm_bwd(*be_, dx, params_->grad(w_), dy, x, params_->param(w_), N, n_out_, n_in_, 0.0f);
  if (b_.held()) be_->bias_bwd(params_->grad(b_), dy, N, n_out_);
}

void RowParallelLinear::bwd_input(float* dx, const float* dy) const {
  gemm_bwd_input(*be_, dx, dy, params_->param(w_), tp_->n_rows(), n_out_, n_in_, 0.0f);
}

void RowParallelLinear::bwd_input_gelu(float* dx, const float* dy, const float* gelu_in) const {
  be_->linear_bwd_input_gelu(dx, dy, params_->param(w_), gelu_in, tp_->n_rows(), n_out_, n_in_);
}

void RowParallelLinear::bwd_weight(const float* dy, const float* x) const {
  const int N = tp_->n_rows();
  gemm_bwd_weight(*be_, params_->grad(w_), dy, x, N, n_out_, n_in_);
  if (b_.held()) be_->bias_bwd(params_->grad(b_), dy, N, n_out_);
}

}  // namespace pentad
