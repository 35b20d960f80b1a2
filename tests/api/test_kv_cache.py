"""GET /kv-cache/presets and POST /kv-cache: DeepSeek-V2's Table 1, for released models and any configuration."""

import pytest

pytestmark = pytest.mark.usefixtures("app")


def presets(client):
    response = client.get("/api/v1/kv-cache/presets")
    assert response.status_code == 200
    return {p["id"]: p for p in response.json["presets"]}


def test_deepseek_v2_reads_34560_elements_and_67_5_kib_per_token_against_1966080(client):
    v2 = presets(client)["deepseek-v2"]
    assert "2405.04434" in v2["source"]
    answer = client.post("/api/v1/kv-cache", json={**v2["request"], "tokens": 1}).json
    assert answer["kind"] == "mla" and answer["elements_per_token"] == 34_560
    assert answer["bytes_per_token"] == 67.5 * 1024
    assert answer["mha_equivalent"]["elements_per_token"] == 1_966_080


@pytest.mark.parametrize(
    "model, kind, per_token",
    [
        ("gpt2", "mha", 2 * 12 * 64 * 12),
        ("llama-3-8b", "gqa", 2 * 8 * 128 * 32),
        ("mistral-7b", "gqa", 2 * 8 * 128 * 32),
        ("qwen2.5-0.5b", "gqa", 2 * 2 * 64 * 24),
        ("falcon-7b", "mqa", 2 * 64 * 32),
        ("deepseek-v3", "mla", (512 + 64) * 61),
    ],
)
def test_every_preset_is_a_body_that_answers_its_table_1_figure(client, model, kind, per_token):
    preset = presets(client)[model]
    assert preset["source"].startswith(("https://", "arXiv:"))
    answer = client.post("/api/v1/kv-cache", json=preset["request"]).json
    assert answer["kind"] == kind and answer["elements_per_token"] == per_token
    cached = min(preset["request"]["tokens"], preset["request"].get("window", preset["request"]["tokens"]))
    assert answer["bytes_total"] == per_token * cached * preset["request"]["bytes_per_element"]


def test_a_custom_configuration_with_half_byte_elements(client):
    answer = client.post(
        "/api/v1/kv-cache",
        json={
            "layers": 2,
            "heads": 4,
            "d_head": 8,
            "latent": {"d_c": 5, "d_rope": 2},
            "tokens": 3,
            "bytes_per_element": 0.5,
        },
    ).json
    assert answer["elements_per_token"] == 14 and answer["bytes_per_token"] == 7 and answer["bytes_total"] == 21
    assert answer["mha_equivalent"] == {"elements_per_token": 128, "bytes_total": 192}
    assert answer["ratio_to_mha"] == 14 / 128


@pytest.mark.parametrize(
    "body, field",
    [
        ({"layers": 1, "heads": 6, "kv_heads": 4, "d_head": 8, "tokens": 3, "bytes_per_element": 2}, "kv_heads"),
        ({"layers": 1, "heads": 6, "d_head": 8, "tokens": 3, "bytes_per_element": 0}, "bytes_per_element"),
        ({"layers": 1, "heads": 6, "d_head": 8, "tokens": 0, "bytes_per_element": 2}, "tokens"),
        ({"layers": 1, "heads": 6, "d_head": 8, "bytes_per_element": 2}, "tokens"),
        ({"layers": 1.5, "heads": 6, "d_head": 8, "tokens": 1, "bytes_per_element": 2}, "layers"),
        (
            {"layers": 1, "heads": 6, "d_head": 8, "tokens": 1, "bytes_per_element": 2, "latent": {"d_rope": 2}},
            "latent.d_c",
        ),
        ({"layers": 1024, "heads": 1024, "d_head": 4096, "tokens": 100_000_000, "bytes_per_element": 8}, "tokens"),
    ],
)
def test_a_configuration_that_does_not_fit_is_a_422_naming_it(client, body, field):
    response = client.post("/api/v1/kv-cache", json=body)
    assert response.status_code == 422 and field in response.json["errors"], response.json


def test_gemma_3_through_the_api_by_layer_kind(client):
    body = presets(client)["gemma-3-27b"]["request"]
    assert body["layer_pattern"] == {"local_per_global": 5, "global_first": False}
    answer = client.post("/api/v1/kv-cache", json=body).json
    per_token = 52 * 8192  # each local layer's 8,192 bytes of one position (16 kv heads x 128 x 2 x bf16)
    assert answer["layers"]["local"] == {
        "layers": 52,
        "positions_cached": 1024,
        "elements_per_token": per_token // 2,
        "bytes_per_token": per_token,
        "bytes": per_token * 1024,
    }
    assert answer["layers"]["global"]["layers"] == 10
    assert round(answer["bytes_if_every_layer_global"] / 2**30, 2) == 62.00
    assert round(answer["bytes_total"] / 2**30, 2) == 10.41


def test_a_layer_pattern_without_a_window_is_a_422(client):
    body = {
        "layers": 4,
        "heads": 4,
        "d_head": 8,
        "tokens": 64,
        "bytes_per_element": 2,
        "layer_pattern": {"local_per_global": 1},
    }
    response = client.post("/api/v1/kv-cache", json=body)
    assert response.status_code == 422
    assert "window" in response.json["errors"]
