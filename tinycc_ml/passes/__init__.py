"""Passes, one per file, registered by name; pipelines are lists of pass names."""

from tinycc_ml.passes import constant_fold, cse, dce, fold_input_affine, fuse_nearest, plan_memory, stable_argmax  # noqa: F401
from tinycc_ml.passes.manager import PASSES, PIPELINES, PassContext, PassOptions, run_passes, run_pipeline

PIPELINES["float"] = ["fold_input_affine", "constant_fold", "cse", "stable_argmax", "fuse_nearest", "dce",
                      "plan_memory"]

__all__ = ["PASSES", "PIPELINES", "PassContext", "PassOptions", "run_passes", "run_pipeline"]
