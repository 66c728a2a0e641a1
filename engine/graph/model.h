#pragma once
// Model: a static DAG of layers built from a model YAML. Layers name their inputs (the
// previous layer by default; "input" is the image batch), so residual nets are DAGs.
// Forward runs in file order (which must be topological), backward in reverse.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/named_tensor.h"
#include "engine/layers/layer.h"

namespace convoy {

// One layer as `convoy info` and Model::summary() describe it.
struct LayerInfo {
  std::string name;
  std::string type;                 // "conv2d", "add", ...
  std::vector<std::string> inputs;  // layer names, "input" for the image batch
  bool reads_previous = false;      // inputs is just the layer above (or the input, for the first)
  Shape output;                     // per sample, e.g. (C, H, W)
  int64_t parameters = 0;           // trainable elements
  int64_t buffers = 0;              // non-trainable state elements (batch-norm running statistics)
  int64_t flops = 0;                // 2 x multiply-adds of one forward pass for one sample
};

// Watches each layer's forward and backward (node indices in file order, as layer_infos()),
// for per-layer timing: `convoy bench --profile`.
class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  virtual void before(int node, bool backward) = 0;
  virtual void after(int node, bool backward) = 0;
};

class Model {
 public:
  // Parses and builds the model (parameters initialized on the CPU from `seed`).
  // `source` names the YAML in messages.
  static Model from_yaml(const std::string& yaml_text, const std::string& source, uint64_t seed);
  static Model from_file(const std::string& path, uint64_t seed);
  // The model YAML with its classifier (the output layer: a linear layer's out_features or a
  // convolution's out_channels) resized to `classes`, as torchvision's num_classes does; the
  // rest of the network is unchanged. An output layer of another type is an InputError.
  static std::string with_classes(const std::string& yaml_text, const std::string& source, int64_t classes);
  static std::string read_file(const std::string& path);
  // The YAML's `input` (C, H, W), checked as from_yaml checks it, without building any layer
  // or initializing parameters: for callers that need only the input shape (the loader alone).
  static Shape input_shape_of(const std::string& yaml_text, const std::string& source);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const std::string& name() const { return name_; }
  const std::string& yaml() const { return yaml_; }
  const Shape& input_shape() const { return input_shape_; }  // (C, H, W)
  const Shape& output_shape() const { return output_shape_; }
  int64_t num_classes() const { return output_shape_.empty() ? 0 : output_shape_[0]; }
  // The name of the layer whose output is the logits (the classifier).
  const std::string& output_layer() const { return nodes_[output_node_].layer->name(); }
  DType compute_dtype() const { return compute_dtype_; }

  // Moves parameters and buffers to the backend's device and prepares gradients in
  // `compute` dtype (f32, or bf16 for mixed precision with f32 master weights). With
  // `layout` nhwc, activations and the convolutions' compute weights are channels-last;
  // the master weights and checkpoints stay (K, C, R, S) either way.
  void to(Backend& backend, DType compute, Layout layout = Layout::nchw);
  // The ops a training step or a forward pass of this model needs (its layers', gradient
  // sums, weight casts) that `ops` cannot run at `compute` dtype with activations in
  // `layout`; empty when it runs them all. Ask before to(), instead of failing mid-step.
  std::vector<OpKind> unsupported_ops(const Ops& ops, DType compute, Layout layout) const;
  Layout layout() const { return layout_; }
  // For mixed precision: refreshes the bf16 copies of the weights from the masters.
  void refresh_compute_weights(Backend& backend);

  // x (N, C, H, W) in the compute dtype on the backend's device -> logits (N, classes).
  Tensor forward(Backend& backend, const Tensor& x, const StepInfo& step);
  // Called during backward with a layer's parameters once their f32 `grad` is final (queued
  // on the backend), so that data-parallel training can reduce them while backward goes on.
  using GradsReady = std::function<void(std::span<Parameter* const>)>;
  // Backpropagates d(loss)/d(logits) of the last training forward into every
  // parameter's `grad` (f32), then frees the saved activations.
  void backward(Backend& backend, const Tensor& grad_logits, const GradsReady& on_ready = {});

  // Trainable parameters, named "<layer>.<param>" (PyTorch-style state-dict names).
  std::vector<std::pair<std::string, Parameter*>> parameters();
  // Parameters then buffers (running statistics), for checkpoints.
  std::vector<NamedTensor> state() ;
  // Loads values by name from a checkpoint; every tensor must be present with its shape.
  void load_state(const std::vector<NamedTensor>& tensors, const std::string& source);

  // The DAG for code that compiles the model (engine/inference): each layer in forward order,
  // its inputs (node indices, -1 = the model input) and its per-sample output shape.
  struct GraphNode {
    Layer* layer;
    std::vector<int> inputs;
    Shape shape;
  };
  std::vector<GraphNode> graph_nodes();
  int output_node() const { return output_node_; }
  // Counts changes of the weights that this object sees: load_state(), to(), and the mutable
  // accessors parameters() and state(). Code that writes through Parameter pointers it kept
  // (an optimizer) calls mark_weights_changed(); compiled plans compare the count.
  uint64_t weights_version() const { return weights_version_; }
  void mark_weights_changed() { ++weights_version_; }

  int64_t parameter_count() const;
  // Elements of the buffers (batch-norm running statistics), which checkpoints also hold.
  int64_t buffer_count() const;
  // 2 x multiply-adds of one forward pass for one sample.
  int64_t forward_flops() const;
  // Every layer in file (= forward) order: what it reads, its output shape and its costs.
  std::vector<LayerInfo> layer_infos() const;
  // Elements of every layer's output for one sample: what a training forward keeps for
  // backward (x 4 bytes in f32).
  int64_t activation_count() const;
  // One line per layer: name, type, output shape, parameter count.
  std::string summary() const;
  // Calls `observer` (not owned; nullptr for none) around every layer's forward and backward.
  void set_observer(LayerObserver* observer) { observer_ = observer; }
  bool observed() const { return observer_ != nullptr; }
  // Whether a training forward draws from the step's seed (a dropout layer): each step is then
  // different device work, which a recording cannot replay.
  bool draws_per_step() const;
  // The device addresses of every parameter, gradient, weight copy and buffer: a recording of a
  // step is stale once any of them moved (Model::to, a resized classifier).
  std::vector<const void*> storage() const;
  // Whether to() fuses each ReLU into the layer before it where that layer can take it
  // (Layer::fuse_relu: batch norm, add) and each residual join's add into a batch norm it reads
  // (Layer::adds_residual), and backward lets a convolution add its input gradient into a
  // residual join's sum (Layer::adds_input_grad). On by default (EngineOptions::fusion, set by
  // whoever builds the model); off turns all three off, for comparisons. The results are the
  // same either way.
  void set_fusion(bool on) { fusion_ = on; }
  // ReLUs fused into the layer before them by the last to().
  int fused_relus() const;
  // Residual joins whose add a layer it reads does (Layer::adds_residual).
  int fused_adds() const;
  // Inference: folds each batch norm into the convolution it alone reads (Layer::fold_conv), so
  // a backend that fuses them runs convolution, bias, residual add and ReLU as one op; the model
  // is on `backend` (to() first) and computes the same results either way. Returns how many were
  // folded (none with fusion off, set_fusion). The model cannot train, and weights changed
  // afterwards are not seen, until the next to(), which undoes it.
  int fold_batch_norms(Backend& backend);
  int folded_batch_norms() const;
  // Gradient sums at residual joins the last backward left to a convolution's own op
  // (Layer::backward_adding) instead of a separate add.
  int gradient_sums_in_op() const { return gradient_sums_in_op_; }

 private:
  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;  // node indices; -1 is the model input
    Shape shape;              // per-sample output shape
    bool fused = false;       // a ReLU whose work its input layer does (fuse_relus)
    bool relu_after = false;  // a ReLU reading it was fused into it
    int adds_from = -1;       // an add whose work this input node's layer does (forward_adding)
    bool runs_at_join = false;  // that input node: its forward runs at the add
    bool folded = false;      // a convolution the batch norm reading it runs (fold_batch_norms)
  };
  Model() = default;
  void fuse_relus();
  // How many nodes read each node's output (the model's input, -1, not counted).
  std::vector<int> reader_counts() const;
  // The gradient sum of `node`'s input, for node's layer to add into (Layer::backward_adding);
  // null where it is not to (not such a layer, no sum yet, a sum someone else holds).
  Tensor* gradient_sum_to_add_into(const Node& node, std::vector<Tensor>& grads) const;
  static std::string with_classes_or_throw(const std::string& yaml_text, const std::string& source, int64_t classes);

  std::string name_;
  std::string yaml_;
  Shape input_shape_;
  Shape output_shape_;
  DType compute_dtype_ = DType::f32;
  Layout layout_ = Layout::nchw;
  std::vector<Node> nodes_;
  int output_node_ = -1;
  uint64_t weights_version_ = 0;
  bool fusion_ = true;
  bool add_input_grads_ = false;  // set by fuse_relus (the same switch)
  int gradient_sums_in_op_ = 0;
  // From the last training forward: the input and every node's output.
  Tensor saved_input_;
  std::vector<Tensor> activations_;
  LayerObserver* observer_ = nullptr;
};

}  // namespace convoy
