"""The cache's memory, as DeepSeek-V2's Table 1 counts it, for every preset and any configuration."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.compute import AttentionInputError
from service.compute.cache_memory import PRESETS, CacheShape, memory


def table_1(kind, heads, kv_heads, d_head, d_c, d_rope, layers):
    """DeepSeek-V2 (arXiv:2405.04434), Table 1, KV cache per token (elements), written out."""
    if kind == "mla":
        return (d_c + d_rope) * layers
    return {"mha": 2 * heads * d_head * layers, "gqa": 2 * kv_heads * d_head * layers, "mqa": 2 * d_head * layers}[kind]


def test_deepseek_v2_caches_34560_elements_per_token_against_1966080_for_mha():
    v2 = next(p for p in PRESETS if p.id == "deepseek-v2")
    answer = memory(v2.shape, 1, 2)
    assert answer["kind"] == "mla"
    assert answer["elements_per_token"] == 34_560
    assert answer["bytes_per_token"] == 69_120 == 67.5 * 1024  # 67.5 KiB in bf16
    assert answer["mha_equivalent"]["elements_per_token"] == 1_966_080
    assert answer["ratio_to_mha"] == pytest.approx(34_560 / 1_966_080)


def test_the_decoupled_rope_key_is_counted():
    """The widely copied estimate forgets d_h^R: 512 * 60 = 30,720 is not DeepSeek-V2's cache."""
    assert (
        memory(CacheShape(layers=60, heads=128, d_head=128, d_c=512, d_rope=64), 1, 2)["elements_per_token"] != 30_720
    )


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.id)
def test_every_preset_reads_table_1_and_names_its_source(preset):
    s = preset.shape
    answer = memory(s, preset.context, preset.bytes_per_element)
    kv = s.heads if s.kv_heads is None else s.kv_heads
    expected = table_1(answer["kind"], s.heads, kv, s.d_head, s.d_c, s.d_rope, s.layers)
    assert answer["elements_per_token"] == expected
    positions = [  # each layer's: a windowed layer holds its window, a global one the whole context
        min(preset.context, s.window)
        if s.window and (s.local_per_global is None or layer_is_local(i, s.local_per_global, s.global_first))
        else preset.context
        for i in range(s.layers)
    ]
    assert answer["bytes_total"] == expected // s.layers * sum(positions) * preset.bytes_per_element
    assert preset.source.startswith(("https://", "arXiv:"))


def test_the_presets_cover_every_kind():
    kinds = {memory(p.shape, 1, 2)["kind"] for p in PRESETS}
    assert kinds == {"mha", "gqa", "mqa", "mla"}
    assert {"gpt2", "llama-3-8b", "mistral-7b", "qwen2.5-0.5b", "deepseek-v2", "deepseek-v3"} <= {p.id for p in PRESETS}


@given(
    layers=st.integers(1, 128),
    heads=st.integers(1, 128),
    d_head=st.integers(1, 256),
    tokens=st.integers(1, 1 << 17),
    size=st.sampled_from([0.5, 1, 2, 4, 8]),
    data=st.data(),
)
def test_any_configuration_reads_table_1_exactly(layers, heads, d_head, tokens, size, data):
    kind = data.draw(st.sampled_from(["mha", "gqa", "mla"]))
    kv = data.draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0])) if kind == "gqa" else None
    d_c = data.draw(st.integers(1, 2048)) if kind == "mla" else None
    d_rope = data.draw(st.integers(0, 128)) if kind == "mla" else 0
    shape = CacheShape(layers=layers, heads=heads, d_head=d_head, kv_heads=kv, d_c=d_c, d_rope=d_rope)
    answer = memory(shape, tokens, size)
    named = answer["kind"]
    assert named == kind or (kind == "gqa" and named in ("mha", "mqa"))
    per_token = table_1(named, heads, kv or heads, d_head, d_c, d_rope, layers)
    assert answer["elements_per_token"] == per_token
    assert answer["elements_per_token_per_layer"] * layers == per_token
    assert answer["bytes_total"] == per_token * tokens * size
    assert answer["mha_equivalent"]["bytes_total"] == 2 * heads * d_head * layers * tokens * size
    assert answer["ratio_to_mha"] == pytest.approx(per_token / (2 * heads * d_head * layers))


def test_a_sliding_window_caps_the_positions_cached():
    shape = CacheShape(layers=32, heads=32, d_head=128, kv_heads=8, window=4096)
    assert (
        memory(shape, 32_768, 2)["bytes_total"] == memory(shape, 4096, 2)["bytes_total"] == 2 * 8 * 128 * 32 * 4096 * 2
    )


@pytest.mark.parametrize(
    "kwargs, tokens, size, field",
    [
        ({"layers": 0, "heads": 2, "d_head": 4}, 1, 2, "layers"),
        ({"layers": 1, "heads": 6, "d_head": 4, "kv_heads": 4}, 1, 2, "kv_heads"),
        ({"layers": 1, "heads": 2, "d_head": 4, "d_rope": 8}, 1, 2, "latent.d_c"),
        ({"layers": 1, "heads": 2, "d_head": 4, "d_c": 8, "kv_heads": 1}, 1, 2, "kv_heads"),
        ({"layers": 1, "heads": 2, "d_head": 4}, 0, 2, "tokens"),
        ({"layers": 1, "heads": 2, "d_head": 4}, 1, 9, "bytes_per_element"),
        ({"layers": 1024, "heads": 1024, "d_head": 4096}, 10**9, 8, "tokens"),  # past 2^53 bytes
    ],
)
def test_a_configuration_that_does_not_fit_is_refused_by_name(kwargs, tokens, size, field):
    with pytest.raises(AttentionInputError) as info:
        memory(CacheShape(**kwargs), tokens, size)
    assert info.value.field == field


GIB = 2**30


def layer_is_local(i, local_per_global, global_first):
    """The layer pattern written out: k local layers and one global, repeated."""
    place = i % (local_per_global + 1)
    return place != 0 if global_first else place != local_per_global


@pytest.mark.parametrize(
    ("model", "every_layer_global_gib", "released_gib"),
    [("gemma-3-27b", 62.00, 10.41), ("gpt-oss-20b", 6.00, 3.00), ("mistral-7b", 4.00, 0.50)],
)
def test_local_layers_save_what_the_model_cards_say(model, every_layer_global_gib, released_gib):
    preset = next(p for p in PRESETS if p.id == model)
    answer = memory(preset.shape, preset.context, 2)
    assert round(answer["bytes_if_every_layer_global"] / GIB, 2) == every_layer_global_gib
    assert round(answer["bytes_total"] / GIB, 2) == released_gib


def test_gemma_3_caches_52_local_layers_of_1024_positions_and_10_global_ones():
    shape = next(p for p in PRESETS if p.id == "gemma-3-27b").shape
    locals_ = sum(layer_is_local(i, 5, False) for i in range(62))
    answer = memory(shape, 131072, 2)
    assert answer["layers"]["local"]["layers"] == locals_ == 52
    assert answer["layers"]["global"]["layers"] == 10
    per_position = 2 * 16 * 128 * 2  # keys and values of 16 heads of 128, bf16
    assert answer["layers"]["local"]["bytes"] == 52 * 1024 * per_position
    assert answer["layers"]["global"]["bytes"] == 10 * 131072 * per_position
    assert answer["reach"] is None  # a global layer sees every position


@pytest.mark.parametrize(("layers", "k", "global_first"), [(24, 1, False), (24, 1, True), (62, 5, True), (7, 3, False)])
def test_the_layer_pattern_counts_its_local_layers(layers, k, global_first):
    shape = CacheShape(layers=layers, heads=4, d_head=8, window=16, local_per_global=k, global_first=global_first)
    assert shape.local_layers == sum(layer_is_local(i, k, global_first) for i in range(layers))


def test_sinks_stay_beside_the_window_in_every_windowed_layer():
    shape = CacheShape(layers=2, heads=4, d_head=8, kv_heads=2, window=1020, sinks=4)
    answer = memory(shape, 65536, 2)
    assert answer["positions_cached"] == 1024  # StreamingLLM's 4 sinks + 1,020 recent
    assert answer["bytes_total"] == 2 * 1024 * (2 * 2 * 8) * 2
    assert memory(shape, 100, 2)["positions_cached"] == 100  # a context shorter than both: all of it


def test_mistral_reaches_its_layers_times_the_window_less_one_plus_one():
    shape = next(p for p in PRESETS if p.id == "mistral-7b").shape
    assert memory(shape, 32768, 2)["reach"] == 32 * (4096 - 1) + 1


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"sinks": 4}, "window"),
        ({"local_per_global": 5}, "window"),
        ({"window": 8, "sinks": -1}, "sinks"),
        ({"window": 8, "local_per_global": 0}, "layer_pattern.local_per_global"),
    ],
)
def test_sinks_and_a_pattern_without_a_window_are_refused_by_name(arguments, field):
    with pytest.raises(AttentionInputError) as refused:
        CacheShape(layers=2, heads=4, d_head=8, **arguments)
    assert refused.value.field == field
