"""How much memory a KV cache takes, as DeepSeek-V2's Table 1 counts it (arXiv:2405.04434), in
elements per token:

    MHA   2 * H * d_head * layers          keys and values of every head
    GQA   2 * kv_heads * d_head * layers   of every key/value head (query heads share them in groups)
    MQA   2 * d_head * layers              one key/value head for all
    MLA   (d_c + d_rope) * layers          the latent and the decoupled RoPE key

times the positions cached (the context, or a sliding window's length at most) and the bytes of an
element. Integer arithmetic (Fractions for half-byte elements): exact at any size. Widely copied MLA
estimators forget d_rope; DeepSeek-V2 reads 34,560 elements per token (67.5 KiB in bf16), not 30,720.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from .errors import AttentionInputError

BYTES_PER_ELEMENT = {0.5: "int4", 1.0: "fp8 or int8", 2.0: "bf16 or fp16", 4.0: "fp32", 8.0: "fp64"}  # the usual ones
MOST_BYTES = 8.0  # any positive number up to this is accepted (a packed 6-bit format is 0.75)
EXACT = 2**53  # the largest integer every JSON reader (JavaScript's numbers) holds exactly


@dataclass(frozen=True)
class CacheShape:
    """A model's attention as its cache sees it. `d_c` set: multi-head latent attention."""

    layers: int
    heads: int
    d_head: int
    kv_heads: int | None = None  # None: one per head (MHA)
    d_c: int | None = None
    d_rope: int = 0
    window: int | None = None  # a sliding window caches at most this many positions (Mistral 7B's rolling buffer)
    sinks: int = 0  # the first positions a windowed layer keeps beside its window (StreamingLLM): S + W cached
    local_per_global: int | None = None  # windowed layers per full one (Gemma 3: 5); None: every layer windowed
    global_first: bool = False  # the pattern starts with the full layer (else local first, as Gemma and gpt-oss)

    def __post_init__(self) -> None:
        for name in ("layers", "heads", "d_head"):
            _positive(name, getattr(self, name))
        if self.kv_heads is not None:
            _positive("kv_heads", self.kv_heads)
            if self.heads % self.kv_heads:
                raise AttentionInputError(
                    f"heads {self.heads} is not divisible by kv_heads {self.kv_heads}", field="kv_heads"
                )
        if self.d_c is not None:
            _positive("latent.d_c", self.d_c)
            if self.kv_heads not in (None, self.heads):
                raise AttentionInputError(
                    "latent attention has no kv heads to share: leave kv_heads out", field="kv_heads"
                )
        if isinstance(self.d_rope, bool) or not isinstance(self.d_rope, int) or self.d_rope < 0:
            raise AttentionInputError(
                f"latent.d_rope must be a whole number >= 0, got {self.d_rope!r}", field="latent.d_rope"
            )
        if self.d_rope and self.d_c is None:
            raise AttentionInputError(
                "d_rope is the decoupled RoPE key of latent attention: give d_c too", field="latent.d_c"
            )
        if self.window is not None:
            _positive("window", self.window)
        if isinstance(self.sinks, bool) or not isinstance(self.sinks, int) or self.sinks < 0:
            raise AttentionInputError(f"sinks must be a whole number >= 0, got {self.sinks!r}", field="sinks")
        if self.local_per_global is not None:
            _positive("layer_pattern.local_per_global", self.local_per_global)
        if (self.sinks or self.local_per_global is not None) and self.window is None:
            raise AttentionInputError(
                "sinks and a layer pattern belong to windowed layers: give a window too", field="window"
            )

    @property
    def kind(self) -> str:
        if self.d_c is not None:
            return "mla"
        kv = self.heads if self.kv_heads is None else self.kv_heads
        if kv == self.heads:
            return "mha"
        return "mqa" if kv == 1 else "gqa"

    @property
    def elements_per_token_per_layer(self) -> int:
        if self.d_c is not None:
            return self.d_c + self.d_rope
        return 2 * (self.heads if self.kv_heads is None else self.kv_heads) * self.d_head

    @property
    def mha_equivalent_per_layer(self) -> int:
        """The same heads, each with its own keys and values of width d_head."""
        return 2 * self.heads * self.d_head

    def positions(self, tokens: int) -> int:
        """What one windowed layer caches of `tokens` (every position without a window)."""
        return tokens if self.window is None else min(tokens, self.window + self.sinks)

    @property
    def local_layers(self) -> int:
        """How many layers hold a window: all, none, or the pattern's share (k local, 1 global, repeated)."""
        if self.window is None:
            return 0
        if self.local_per_global is None:
            return self.layers
        period = self.local_per_global + 1
        first = 1 if self.global_first else 0  # where the locals start in each period
        return sum(1 for i in range(self.layers) if first <= i % period < first + self.local_per_global)

    def reach(self) -> int | None:
        """How far back information can travel when every layer is windowed: L(W - 1) + 1 positions
        (query i sees W keys with itself); None when a full layer sees everything."""
        if self.window is None or self.local_layers < self.layers:
            return None
        return self.layers * (self.window - 1) + 1


def memory(shape: CacheShape, tokens: int, bytes_per_element: float) -> dict[str, object]:
    """The cache of `shape` holding `tokens` positions of context, element by element and in bytes,
    beside the MHA equivalent (what the same heads would cache without sharing or compressing)."""
    _positive("tokens", tokens)
    size = _bytes(bytes_per_element)
    per_token = shape.elements_per_token_per_layer * shape.layers
    mha_per_token = shape.mha_equivalent_per_layer * shape.layers
    local, cached = shape.local_layers, shape.positions(tokens)
    layer_positions = local * cached + (shape.layers - local) * tokens  # positions cached over every layer
    total = shape.elements_per_token_per_layer * layer_positions * size
    mha_total = shape.mha_equivalent_per_layer * layer_positions * size
    if mha_total >= EXACT:
        raise AttentionInputError(
            f"the MHA equivalent of this cache is {float(mha_total):.4g} bytes, past what a JSON number holds "
            f"exactly (2^53): ask for fewer tokens or layers",
            field="tokens",
        )
    answer: dict[str, object] = {
        "kind": shape.kind,
        "elements_per_token_per_layer": shape.elements_per_token_per_layer,
        "elements_per_token": per_token,
        "bytes_per_token": _number(per_token * size),
        "positions_cached": cached if local == shape.layers else tokens,
        "bytes_total": _number(total),
        "mha_equivalent": {"elements_per_token": mha_per_token, "bytes_total": _number(mha_total)},
        "ratio_to_mha": float(Fraction(per_token, mha_per_token)),
    }
    if shape.window is not None:  # per layer kind: its bytes a token times the positions it keeps are its bytes
        answer["layers"] = {
            "local": _kind(shape, local, cached, size),
            "global": _kind(shape, shape.layers - local, tokens, size),
        }
        answer["bytes_if_every_layer_global"] = _number(per_token * tokens * size)
        answer["reach"] = shape.reach()
    return answer


def _kind(shape: CacheShape, layers: int, positions: int, size: Fraction) -> dict[str, object]:
    """The layers of one kind (local or global): how many, the positions each keeps, what a position costs
    over all of them, and their bytes (bytes_per_token x positions_cached)."""
    per_token = shape.elements_per_token_per_layer * layers
    return {
        "layers": layers,
        "positions_cached": positions,
        "elements_per_token": per_token,
        "bytes_per_token": _number(per_token * size),
        "bytes": _number(per_token * positions * size),
    }


def _bytes(value: float) -> Fraction:
    """The bytes of one element as an exact fraction (a float is a binary fraction: 0.75 is exact)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MOST_BYTES:
        usual = ", ".join(f"{k:g} ({v})" for k, v in BYTES_PER_ELEMENT.items())
        raise AttentionInputError(
            f"bytes_per_element must be a number above 0 and at most {MOST_BYTES:g}, such as {usual}; got {value!r}",
            field="bytes_per_element",
        )
    return Fraction(value)


def _number(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AttentionInputError(f"{name} must be a positive whole number, got {value!r}", field=name)


@dataclass(frozen=True)
class ModelPreset:
    """A released model's attention, as its published configuration states it."""

    id: str
    name: str
    shape: CacheShape
    context: int  # the longest context it was released for (max_position_embeddings)
    bytes_per_element: float  # the released weights' type (bf16: 2)
    source: str  # where the numbers are published
    note: str = ""


PRESETS: tuple[ModelPreset, ...] = (
    ModelPreset("gpt2", "GPT-2 small", CacheShape(layers=12, heads=12, d_head=64), 1024, 4,
                "https://huggingface.co/openai-community/gpt2/blob/main/config.json (n_layer 12, n_head 12, "
                "n_embd 768, n_ctx 1024; float32)"),
    ModelPreset("llama-3-8b", "Llama 3 8B", CacheShape(layers=32, heads=32, d_head=128, kv_heads=8), 8192, 2,
                "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json (num_hidden_layers 32, "
                "num_attention_heads 32, num_key_value_heads 8, hidden_size 4096, max_position_embeddings 8192; "
                "bfloat16)"),
    ModelPreset("mistral-7b", "Mistral 7B (v0.1)", CacheShape(layers=32, heads=32, d_head=128, kv_heads=8,
                                                                window=4096), 32768, 2,
                "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json (32 layers, 32 heads, "
                "8 key/value heads, hidden_size 4096, sliding_window 4096, max_position_embeddings 32768; "
                "bfloat16); the rolling buffer cache: arXiv:2310.06825, section 2",
                "a sliding window of 4,096: the cache holds at most 4,096 positions, 8x less than 32,768; "
                "32 layers reach 32 x 4,095 + 1 = 131,041 positions back (the paper counts W + 1 keys: 32 x 4,096 = "
                "131,072)"),
    ModelPreset("qwen2.5-0.5b", "Qwen2.5 0.5B", CacheShape(layers=24, heads=14, d_head=64, kv_heads=2), 32768, 2,
                "https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json (num_hidden_layers 24, "
                "num_attention_heads 14, num_key_value_heads 2, hidden_size 896, max_position_embeddings 32768; "
                "bfloat16)"),
    ModelPreset("falcon-7b", "Falcon 7B", CacheShape(layers=32, heads=71, d_head=64, kv_heads=1), 2048, 2,
                "https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json (num_hidden_layers 32, "
                "num_attention_heads 71, hidden_size 4544, multi_query true; bfloat16)"),
    ModelPreset("deepseek-v2", "DeepSeek-V2", CacheShape(layers=60, heads=128, d_head=128, d_c=512, d_rope=64),
                163840, 2,
                "arXiv:2405.04434, Table 1 and the hyper-parameters of section 3.1 (60 layers, 128 heads, d_h 128, "
                "d_c 512, d_h^R 64); "
                "https://huggingface.co/deepseek-ai/DeepSeek-V2/blob/main/config.json (kv_lora_rank 512, "
                "qk_rope_head_dim 64, max_position_embeddings 163840)"),
    ModelPreset("gemma-2-9b", "Gemma 2 9B", CacheShape(layers=42, heads=16, d_head=256, kv_heads=8, window=4096,
                                                       local_per_global=1), 8192, 2,
                "https://huggingface.co/google/gemma-2-9b/blob/main/config.json (num_hidden_layers 42, "
                "num_attention_heads 16, num_key_value_heads 8, head_dim 256, sliding_window 4096, "
                "max_position_embeddings 8192; bfloat16); local and global layers alternate, local first: "
                "arXiv:2408.00118, section 2",
                "local and global layers alternate, local first; scores scaled by 1/sqrt(256)"),
    ModelPreset("gemma-2-27b", "Gemma 2 27B", CacheShape(layers=46, heads=32, d_head=128, kv_heads=16, window=4096,
                                                         local_per_global=1), 8192, 2,
                "https://huggingface.co/google/gemma-2-27b/blob/main/config.json (num_hidden_layers 46, "
                "num_attention_heads 32, num_key_value_heads 16, head_dim 128, sliding_window 4096, "
                "query_pre_attn_scalar 144; bfloat16); arXiv:2408.00118, section 2",
                "local and global layers alternate, local first; scores scaled by 1/sqrt(144), not 1/sqrt(128)"),
    ModelPreset("gemma-3-27b", "Gemma 3 27B", CacheShape(layers=62, heads=32, d_head=128, kv_heads=16, window=1024,
                                                         local_per_global=5), 131072, 2,
                "https://huggingface.co/google/gemma-3-27b-pt/blob/main/config.json (text_config: num_hidden_layers "
                "62, num_attention_heads 32, num_key_value_heads 16, head_dim 128, sliding_window 1024, "
                "sliding_window_pattern 6; bfloat16); five local layers per global one: arXiv:2503.19786, section 2",
                "five local layers (window 1,024) per global one: 52 local, 10 global; 62.00 GiB of cache at 131,072 "
                "tokens if every layer were global, 10.41 GiB as released"),
    ModelPreset("gpt-oss-20b", "gpt-oss-20b", CacheShape(layers=24, heads=64, d_head=64, kv_heads=8, window=128,
                                                         local_per_global=1), 131072, 2,
                "https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json (num_hidden_layers 24, "
                "num_attention_heads 64, num_key_value_heads 8, head_dim 64, sliding_window 128, layer_types "
                "sliding and full alternating, max_position_embeddings 131072); the model card, arXiv:2508.10925",
                "banded windows of 128 and full layers alternate; each head has a learned sink logit (no cache): "
                "6.00 GiB of cache at 131,072 tokens if every layer were global, 3.00 GiB as released"),
    ModelPreset("deepseek-v3", "DeepSeek-V3", CacheShape(layers=61, heads=128, d_head=128, d_c=512, d_rope=64),
                163840, 2,
                "arXiv:2412.19437, the hyper-parameters of section 4.2 (61 layers, 128 heads, d_h 128, d_c 512, "
                "d_h^R 64); "
                "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json"),
)  # fmt: skip
