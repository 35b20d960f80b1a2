"""The checker names each mistake, computed independently by the engine's failure modes."""

import numpy as np
import pytest

from service.compute import FAILURE_MODES, multi_head_attention
from service.compute.decode import one_pass
from service.compute.failure_modes import REGISTRY
from service.exercise.diagnose import MISTAKES, diagnose, expected_outputs

TOKENS = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]
# The exercise case has no W_O, no grouped kv heads and no cache: those modes are not the checker's.
VISIBLE = sorted(m for m in FAILURE_MODES if REGISTRY[m].exercise and m != "no_output_projection")


def test_attending_before_appending_is_the_diagonal_masked_slip_of_a_decoder():
    """With no cache to see the difference, the decoder's bug computes what masking j >= i computes."""
    trace = one_pass(TOKENS, 2, failure_mode="cache_not_appended")
    result = diagnose(TOKENS, 2, True, {"weights": trace.weights, "concatenated": trace.concat})
    assert result.diagnosis == "diagonal_masked"


@pytest.mark.parametrize("mode", VISIBLE)
def test_each_engine_failure_mode_is_diagnosed_as_itself(mode):
    trace = one_pass(TOKENS, 2, failure_mode=mode)
    result = diagnose(TOKENS, 2, True, {"weights": trace.weights, "concatenated": trace.concat})
    assert not result.correct
    assert result.diagnosis == mode and result.mistakes == (mode,)
    assert result.message == MISTAKES[mode]


@pytest.mark.parametrize("part", ["weights", "head_outputs", "concatenated"])
def test_one_part_is_enough(part):
    trace = multi_head_attention(TOKENS, 2, failure_mode="no_scaling")
    names = {"weights": trace.weights, "head_outputs": trace.head_outputs, "concatenated": trace.concat}
    assert diagnose(TOKENS, 2, True, {part: names[part]}).diagnosis == "no_scaling"


def test_a_correct_output_is_correct():
    trace = multi_head_attention(TOKENS, 2)
    result = diagnose(TOKENS, 2, True, {"weights": trace.weights.tolist(), "concatenated": trace.concat})
    assert result.correct and result.diagnosis is None and result.max_abs_error < 1e-12


def test_random_output_is_incorrect_with_no_known_mistake():
    result = diagnose(TOKENS, 2, True, {"weights": np.random.default_rng(0).random((2, 3, 3))})
    assert not result.correct and result.mistakes == () and "not a known mistake" in result.message


def test_the_starters_three_bugs_are_named_together():
    import importlib.util

    spec = importlib.util.spec_from_file_location("starter", "exercises/multi-head-attention/starter.py")
    starter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(starter)
    out = starter.multi_head_attention(TOKENS, 2)
    result = diagnose(TOKENS, 2, True, {"weights": out["weights"], "concatenated": out["concatenated"]})
    assert set(result.mistakes) == {"interleaved_split", "no_scaling", "mask_after_softmax"}
    assert result.diagnosis is None  # more than one mistake


def test_extra_mistakes_match_a_plain_description():
    correct = multi_head_attention(TOKENS, 2)
    no_mask = expected_outputs(TOKENS, 2, True, "no_mask")["weights"]
    np.testing.assert_allclose(no_mask, multi_head_attention(TOKENS, 2, causal=False).weights)
    transposed = expected_outputs(TOKENS, 2, True, "weights_transposed")["weights"]
    np.testing.assert_allclose(transposed, np.swapaxes(correct.weights, 1, 2))
    diagonal = expected_outputs(TOKENS, 2, True, "diagonal_masked")["weights"]
    assert np.all(np.diagonal(diagonal, axis1=1, axis2=2) == 0) and np.all(diagonal[:, 0] == 0)


def test_wrong_shapes_are_input_errors():
    from service.compute import AttentionInputError

    with pytest.raises(AttentionInputError, match=r"output.weights has shape \[3, 2, 3\]"):
        diagnose(TOKENS, 2, True, {"weights": np.zeros((3, 2, 3))})
