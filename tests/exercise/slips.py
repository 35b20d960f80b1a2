"""The slips every checker must name (the issue's list): the lesson's failure modes and the common
mistakes, each written by hand in implementations/handwritten.py."""

HANDWRITTEN_SLIPS = [
    "diagonal_masked",
    "scale_by_d_model",
    "softmax_wrong_axis",
    "swapped_head_order",
    "no_mask",
    "mask_after_softmax",
    "interleaved_split",
    "reuse_first_slice",
    "no_scaling",
    "no_output_projection",
    "zero_mask",
    "weights_transposed",
]
