#include "engine/ops/ops.h"

namespace convoy {

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::conv2d_forward: return "conv2d_forward";
    case OpKind::conv2d_backward_data: return "conv2d_backward_data";
    case OpKind::conv2d_backward_weights: return "conv2d_backward_weights";
    case OpKind::batchnorm_forward_train: return "batchnorm_forward_train";
    case OpKind::batchnorm_forward_eval: return "batchnorm_forward_eval";
    case OpKind::batchnorm_backward: return "batchnorm_backward";
    case OpKind::activation_forward: return "activation_forward";
    case OpKind::activation_backward: return "activation_backward";
    case OpKind::pool2d_forward: return "pool2d_forward";
    case OpKind::pool2d_backward: return "pool2d_backward";
    case OpKind::linear_forward: return "linear_forward";
    case OpKind::linear_backward: return "linear_backward";
    case OpKind::add: return "add";
    case OpKind::add_inplace: return "add_inplace";
    case OpKind::concat_channels: return "concat_channels";
    case OpKind::split_channels: return "split_channels";
    case OpKind::dropout_forward: return "dropout_forward";
    case OpKind::dropout_backward: return "dropout_backward";
    case OpKind::softmax_cross_entropy: return "softmax_cross_entropy";
    case OpKind::softmax: return "softmax";
    case OpKind::cast: return "cast";
    case OpKind::fill: return "fill";
    case OpKind::sgd_update: return "sgd_update";
    case OpKind::adamw_update: return "adamw_update";
    case OpKind::normalize_augment: return "normalize_augment";
  }
  return "?";  // unreachable: the switch is exhaustive (-Werror=switch)
}

}  // namespace convoy
