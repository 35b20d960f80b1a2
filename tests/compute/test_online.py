"""The online softmax, tile by tile, against FlashAttention-2's loop written out a row at a time for the
tests (plain_python.py: `reference_tiles`, over the scores of the plain-Python pass `reference_mha`)."""

import math

import numpy as np
import pytest

from service.compute.errors import AttentionInputError
from service.compute.online import first_difference, tiled_attention

from .plain_python import reference_mha, reference_tiles, sees

SLIPS = ("online_no_rescale", "online_max_not_carried", "online_diagonal_skipped")


def cases():
    rng = np.random.default_rng(51)
    rising = np.outer(np.arange(1, 8), np.ones(4)) * 2.0  # each key scores above the last: the maximum rises every tile
    yield "random", rng.normal(size=(7, 4))
    yield "large logits", rng.normal(size=(7, 4)) * 30.0  # scores of several hundred: exp overflows unless shifted
    yield "ties", np.tile(rng.normal(size=(1, 4)), (7, 1))  # every score of a row equal
    yield "maximum rising", rising


def reference(x, heads, block_q, block_k, slip=None, causal=True, window=None, sinks=0, sink_logit=None):
    """Each head's tiles, outputs and L from the plain-Python pass's own scores and values."""
    plain = reference_mha(x.tolist(), heads, causal=causal, window=window, sinks=sinks, sink_logit=sink_logit)
    n = len(x)
    visible = [[sees(i, j, causal, window, sinks) for j in range(n)] for i in range(n)]
    return [
        reference_tiles(
            plain["scores"][h],
            plain["value"][h],
            visible,
            block_q,
            block_k,
            slip,
            None if sink_logit is None else sink_logit[h],
        )
        for h in range(heads)
    ]


def assert_close(actual, expected, scale=1.0, tol=1e-14):
    """Equal to `tol` relative to the values' size (`scale`, at least 1); -inf (null) where the reference has it."""
    a, e = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert a.shape == e.shape
    assert np.array_equal(np.isinf(a), np.isinf(e))
    finite = np.isfinite(e)
    assert np.abs(a[finite] - e[finite]).max(initial=0.0) <= tol * max(1.0, scale), np.abs(a - e).max()


@pytest.mark.parametrize("name,x", list(cases()))
def test_every_block_size_gives_the_plain_softmax_and_its_log_sum_exp(name, x):
    n, heads = x.shape[0], 2
    plain = reference_mha(x.tolist(), heads)
    size = float(np.abs(x).max())
    lse = [[log_sum_exp(row[: i + 1]) for i, row in enumerate(plain["scores"][h])] for h in range(heads)]
    for block_q in range(1, n + 1):
        for block_k in range(1, n + 1):
            tiled = tiled_attention(x, heads, block_q=block_q, block_k=block_k)
            assert tiled.max_difference_from_plain <= 1e-14 * max(1.0, size), (block_q, block_k)
            for h, head in enumerate(tiled.heads):
                assert_close(head.output, plain["head_outputs"][h], size)
                assert_close(head.lse, lse[h], float(np.abs(plain["scores"][h]).max()))


def log_sum_exp(scores):
    top = max(scores)  # exp(s) alone overflows past s = 709: the large logits' case
    return top + math.log(math.fsum(math.exp(s - top) for s in scores))


@pytest.mark.parametrize("block_q,block_k", [(1, 1), (2, 3), (3, 2), (7, 1), (1, 7), (4, 4)])
def test_each_tile_holds_the_running_values_of_the_loop_written_out(block_q, block_k):
    x = dict(cases())["random"]
    tiled = tiled_attention(x, 2, block_q=block_q, block_k=block_k)
    for head, expected in zip(tiled.heads, reference(x, 2, block_q, block_k), strict=True):
        assert [t.status for t in head.tiles] == [t["status"] for t in expected["tiles"]]
        for tile, want in zip(head.tiles, expected["tiles"], strict=True):
            assert (tile.rows, tile.keys) == (want["rows"], want["keys"])
            for name in ("m", "alpha", "l", "o_tilde"):
                if want["status"] == "skipped":
                    assert getattr(tile, name) is None
                else:
                    assert_close(getattr(tile, name), want[name], 10.0, 1e-13)


@pytest.mark.parametrize("tiles_per_side,block", [(1, 5), (2, 3), (4, 2), (6, 1), (3, 3)])
def test_square_blocks_under_the_causal_mask_compute_half_the_tiles_and_mask_the_diagonal(tiles_per_side, block):
    t = tiles_per_side
    x = np.random.default_rng(t).normal(size=(t * block, 4))
    counts = tiled_attention(x, 2, block_q=block, block_k=block).counts
    masked = t if block > 1 else 0  # a 1 x 1 tile on the diagonal hides nothing
    assert counts == {"computed": t * (t + 1) // 2, "masked": masked, "skipped": t * (t - 1) // 2}


def test_without_the_causal_mask_every_tile_is_computed():
    x = dict(cases())["random"]
    tiled = tiled_attention(x, 1, block_q=2, block_k=3, causal=False)
    assert tiled.counts == {"computed": 4 * 3, "masked": 0, "skipped": 0}
    assert tiled.max_difference_from_plain <= 1e-14


def test_a_window_skips_the_tiles_out_of_reach_and_a_sink_logit_joins_l_once_at_the_end():
    x = np.random.default_rng(7).normal(size=(12, 4))
    long = {"window": 3, "sinks": 1, "sink_logit": [0.5, -1.0]}
    tiled = tiled_attention(x, 2, block_q=3, block_k=2, reach=long)
    expected = reference(x, 2, 3, 2, **long)
    plain = reference_mha(x.tolist(), 2, **long)
    for h, head in enumerate(tiled.heads):
        assert [t.status for t in head.tiles] == [t["status"] for t in expected[h]["tiles"]]
        assert_close(head.output, plain["head_outputs"][h])
        # L is the log-sum-exp of the visible scores alone (issue 65, C5); the sink's share is its own field
        scores = plain["scores"][h]
        visible = [
            log_sum_exp([s for j, s in enumerate(row) if sees(i, j, True, 3, 1)]) for i, row in enumerate(scores)
        ]
        assert_close(head.lse, visible, 10.0)
        z = long["sink_logit"][h]  # joined once: every row's maximum at least z, its sum at least exp(z - m)
        assert np.all(head.sink["m"] >= z) and np.all(head.sink["l"] >= np.exp(z - head.sink["m"]))
        assert_close(head.sink["share"], 1.0 / (1.0 + np.exp(np.asarray(visible) - z)))  # sigmoid(z - L)
        # the lesson's identity: a row's weights sum to sigmoid(L - z)
        assert_close(np.sum(plain["weights"][h], axis=1), 1.0 / (1.0 + np.exp(z - np.asarray(visible))))
    assert "skipped" in [t.status for t in tiled.heads[0].tiles[:6]]  # the first rows' future
    far = [t for t in tiled.heads[0].tiles if t.query_block == 3 and t.key_block == 2]  # rows 9-11, keys 4-5
    assert far[0].status == "skipped"  # beyond every row's window, and not a sink


@pytest.mark.parametrize("slip", SLIPS)
@pytest.mark.parametrize("block_q,block_k", [(2, 2), (3, 1), (1, 3)])
def test_each_slip_computes_what_the_broken_loop_would(slip, block_q, block_k):
    x = dict(cases())["maximum rising"] / 4 + np.random.default_rng(3).normal(size=(7, 4))
    tiled = tiled_attention(x, 2, block_q=block_q, block_k=block_k, slip=slip)
    for head, expected in zip(tiled.heads, reference(x, 2, block_q, block_k, slip), strict=True):
        assert [t.status for t in head.tiles] == [t["status"] for t in expected["tiles"]]
        assert_close(head.output, expected["output"], 10.0, 1e-12)
        assert_close(head.lse, expected["lse"], 10.0, 1e-12)
    assert tiled.max_difference_from_plain > 1e-3  # the learner sees it is wrong


def reference_first_difference(right, broken):
    """The first tile (over heads, in the order computed) where the loops' statuses or m, l, O~ differ."""
    found = []
    for h, (a, b) in enumerate(zip(right, broken, strict=True)):
        for index, (s, t) in enumerate(zip(a["tiles"], b["tiles"], strict=True)):
            if s["status"] != t["status"]:
                found.append((index, h, "status"))
                break
            if s["status"] == "skipped":
                continue
            stage = next((k for k in ("m", "l", "o_tilde") if not np.allclose(s[k], t[k], rtol=1e-9, atol=1e-12)), None)
            if stage is not None:
                found.append((index, h, stage))
                break
    return min(found)


@pytest.mark.parametrize("slip", SLIPS)
def test_each_slip_is_found_at_the_tile_and_value_where_it_first_differs(slip):
    x = dict(cases())["maximum rising"] / 4 + np.random.default_rng(3).normal(size=(7, 4))
    right = tiled_attention(x, 2, block_q=2, block_k=2)
    broken = tiled_attention(x, 2, block_q=2, block_k=2, slip=slip)
    index, head, stage = reference_first_difference(reference(x, 2, 2, 2), reference(x, 2, 2, 2, slip))
    tile = right.heads[head].tiles[index]
    assert first_difference(right, broken) == {
        "head": head,
        "tile": index,
        "query_block": tile.query_block,
        "key_block": tile.key_block,
        "stage": stage,
    }
    assert first_difference(right, right) is None
    if slip == "online_diagonal_skipped":
        assert (index, stage) == (0, "status")  # the very first tile is on the diagonal


def test_the_memory_held_is_a_tile_and_two_numbers_a_row_against_n_squared():
    tiled = tiled_attention(np.ones((8, 4)), 1, block_q=4, block_k=2)
    assert tiled.memory == {"tiled": 4 * 2 + 2 * 4, "plain": 64}


@pytest.mark.parametrize(
    "blocks,field", [((0, 1), "block_q"), ((1, 8), "block_k"), ((True, 1), "block_q"), ((2.0, 1), "block_q")]
)
def test_a_block_outside_one_to_n_is_refused_naming_it(blocks, field):
    with pytest.raises(AttentionInputError) as caught:
        tiled_attention(np.ones((7, 4)), 2, block_q=blocks[0], block_k=blocks[1])
    assert caught.value.field == field


def test_latent_attention_in_its_absorbed_form_is_tiled_over_the_same_keys_and_values_made_whole():
    rng = np.random.default_rng(5)
    latent = {"down": rng.normal(size=(4, 2)), "up_key": rng.normal(size=(2, 4)), "up_value": rng.normal(size=(2, 4))}
    x = rng.normal(size=(5, 4))
    absorbed = tiled_attention(x, 2, block_q=2, block_k=2, latent={**latent, "absorbed": True})
    plain = reference_mha(x.tolist(), 2, latent={k: v.tolist() for k, v in latent.items()})
    for h, head in enumerate(absorbed.heads):
        assert_close(head.output, plain["head_outputs"][h], 10.0)
