#pragma once
// The op set's one list: CONVOY_OPS(X) calls X(name) for every op, in the order of OpKind. The
// name is the op's method in Ops (engine/ops/ops.h), its OpKind and its op_name(); ops.h builds
// all three from this list.
#define CONVOY_OPS(X)                                                               \
  X(conv2d_forward) X(conv2d_backward_data) X(conv2d_backward_weights)             \
  X(batchnorm_forward_train) X(batchnorm_forward_eval) X(batchnorm_backward)        \
  X(activation_forward) X(activation_backward)                                      \
  X(pool2d_forward) X(pool2d_backward)                                              \
  X(linear_forward) X(linear_backward)                                              \
  X(add) X(add_inplace) X(concat_channels) X(split_channels)                        \
  X(dropout_forward) X(dropout_backward)                                            \
  X(channel_scale_forward) X(channel_scale_backward)                                \
  X(softmax_cross_entropy) X(softmax)                                               \
  X(channel_softmax_forward) X(channel_softmax_backward)                            \
  X(upsample_forward) X(upsample_backward)                                          \
  X(cast) X(fill)                                                                   \
  X(sgd_update) X(adamw_update)                                                     \
  X(normalize_augment)
