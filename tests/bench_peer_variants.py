#!/usr/bin/env python3
"""The pytorch_compiled peer's choice of variants (benchmarks/peers/torch_variants.py), without
torch: which variants a case plans, what CONVOY_PEER_VARIANTS keeps, and which one is reported.
Run by tests/test_bench_suite.cpp (Bench.PeerVariantSelection); exits non-zero on a failure."""
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "peers"))
import torch_variants as tv  # noqa: E402


class PlanVariants(unittest.TestCase):
    def test_training_tries_each_mode_with_the_fused_and_the_compiled_optimizer(self):
        self.assertEqual(tv.plan_variants("training", "bf16", ["default", "reduce-overhead"], True),
                         ["default/fused", "default/foreach-compiled",
                          "reduce-overhead/fused", "reduce-overhead/foreach-compiled"])

    def test_without_fused_sgd_the_eager_step_is_the_other_variant(self):
        self.assertEqual(tv.plan_variants("training", "fp32", ["max-autotune-no-cudagraphs"], False),
                         ["max-autotune-no-cudagraphs/eager", "max-autotune-no-cudagraphs/foreach-compiled"])

    def test_bf16_inference_tries_autocast_and_bf16_weights(self):
        self.assertEqual(tv.plan_variants("inference", "bf16", ["default", "reduce-overhead"], True),
                         ["default/autocast", "default/bf16-weights",
                          "reduce-overhead/autocast", "reduce-overhead/bf16-weights"])

    def test_fp32_and_tf32_inference_have_one_variant_per_mode(self):
        self.assertEqual(tv.plan_variants("inference", "fp32", ["default"], True), ["default/fp32"])
        self.assertEqual(tv.plan_variants("inference", "tf32", ["default", "max-autotune"], False),
                         ["default/tf32", "max-autotune/tf32"])

    def test_the_default_modes_are_the_suites_default(self):
        self.assertEqual(tv.DEFAULT_COMPILE_MODES, ("default", "reduce-overhead"))
        self.assertEqual(set(tv.CUDA_GRAPH_MODES) - set(tv.COMPILE_MODES), set())


class SelectVariants(unittest.TestCase):
    names = ["default/fused", "default/foreach-compiled", "reduce-overhead/fused", "reduce-overhead/foreach-compiled"]

    def test_empty_spec_keeps_all(self):
        self.assertEqual(tv.select_variants(self.names, ""), self.names)
        self.assertEqual(tv.select_variants(self.names, None), self.names)
        self.assertEqual(tv.select_variants(self.names, " , "), self.names)

    def test_patterns_keep_what_they_match_in_plan_order(self):
        self.assertEqual(tv.select_variants(self.names, "*/fused"), ["default/fused", "reduce-overhead/fused"])
        self.assertEqual(tv.select_variants(self.names, "reduce-overhead/foreach-compiled, default/*"),
                         ["default/fused", "default/foreach-compiled", "reduce-overhead/foreach-compiled"])

    def test_a_pattern_matches_whole_names_only(self):
        self.assertEqual(tv.select_variants(self.names, "fused"), [])
        self.assertEqual(tv.select_variants(self.names, "default"), [])


class BestVariant(unittest.TestCase):
    def test_the_fastest_wins(self):
        self.assertEqual(tv.best_variant({"default/fused": 13477.0, "reduce-overhead/fused": 17509.0,
                                          "reduce-overhead/foreach-compiled": 16000}), "reduce-overhead/fused")

    def test_variants_that_did_not_run_are_ignored(self):
        nan = float("nan")
        self.assertEqual(tv.best_variant({"a/x": None, "b/x": nan, "c/x": 0.0, "d/x": True, "e/x": "fast",
                                          "f/x": 12.5}), "f/x")

    def test_none_when_nothing_ran(self):
        self.assertIsNone(tv.best_variant({}))
        self.assertIsNone(tv.best_variant({"a/x": None, "b/x": float("inf")}))

    def test_a_tie_goes_to_the_first_listed(self):
        self.assertEqual(tv.best_variant({"default/autocast": 100.0, "default/bf16-weights": 100.0}),
                         "default/autocast")

    def test_split_variant(self):
        self.assertEqual(tv.split_variant("max-autotune-no-cudagraphs/bf16-weights"),
                         ("max-autotune-no-cudagraphs", "bf16-weights"))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
