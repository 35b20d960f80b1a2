"""Speculative decoding on the trained byte model, exactly: a draft proposes gamma bytes, the whole model (the
target) verifies them in one pass of gamma + 1 queries over its KV cache, each draft is kept with probability
min(1, p/q) (compute/speculative.py), a rejection draws from the residual, and the cache is rolled back to
the accepted prefix. The drafts: the model's own first layer read through the final norm and W_U (the
logit lens as a draft: self-speculation), or the bigram table of the training text.

The cache is the decode's (compute/decode.py `Cache`, one per layer): a block of m positions appends m rows
and reads every row back; its queries see every cached row and the block's own rows up to themselves (the
causal mask inside the block). The rollback truncates it. Shapes: n positions, H heads, d_h = d / H, V = 256.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from ..compute import speculative as rule
from ..compute.decode import Cache
from ..compute.failure_modes import Recipe, recipe_of
from ..compute.rope import RopeConfig, rotate
from ..compute.steps import merge_heads, softmax, split_heads
from . import AnyModel
from .byte_model import Model, byte_text, layer_norm
from .present_inside import byte_tokens


class Decoder:
    """The model's first `layers` layers decoding a block of positions at a time over their KV caches, read
    through the final norm and W_U (all of them: the target; the first: the lens draft)."""

    def __init__(self, model: Model, layers: int, capacity: int):
        self.model, self.layers = model, layers
        self.caches = [Cache(capacity) for _ in range(layers)]
        self.rope = RopeConfig(**{k: model.rope[k] for k in ("style", "base")})

    @property
    def length(self) -> int:
        """How many rows each cache holds."""
        return self.caches[0].length

    def extend(self, tokens: np.ndarray, start: int) -> np.ndarray:
        """Bytes [m] at positions start.. -> [m, V] next-byte probabilities, their keys and values appended."""
        m, heads, w = len(tokens), self.model.heads, self.model.weights
        positions = np.arange(start, start + m)
        x = w["embed"][tokens]  # [m, d]
        for index, kv in enumerate(self.caches):
            w_q, w_k, w_v, w_o = (w[f"layers.{index}.{name}"] for name in ("w_q", "w_k", "w_v", "w_o"))
            h = layer_norm(x)
            q, k, v = (split_heads(h @ weight, heads) for weight in (w_q, w_k, w_v))  # [H, m, d_h]
            q, k = rotate(q, self.rope, positions), rotate(k, self.rope, positions)
            kv.append((k, v), kv.length, kv.length + m)
            (keys, values), _ = kv.read()  # [H, L, d_h]: every cached row, the block's last
            scores = q @ keys.transpose(0, 2, 1) / np.sqrt(q.shape[-1])  # [H, m, L]
            hidden = np.arange(keys.shape[1])[None, :] > (keys.shape[1] - m + np.arange(m))[:, None]  # [m, L]
            x = x + merge_heads(softmax(scores, hidden) @ values) @ w_o  # [m, d]
        logits = layer_norm(x) @ w["unembed"]  # [m, V]
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def rows(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each layer's cached keys and values [H, L, d_h], as held now."""
        return [kv.read()[0] for kv in self.caches]

    def truncate(self, length: int) -> None:
        for kv in self.caches:
            kv.truncate(length)


@cache
def bigram(model_dir: str) -> np.ndarray:
    """[256, 256] the training text's bigram table, q(b | a) = (count + 1) / (total + 256) (Laplace: no byte
    has q = 0, so every ratio p/q is defined)."""
    rows = json.loads((Path(model_dir) / "bigram.json").read_text())["rows"]
    table = np.ones((256, 256))
    for a, row in enumerate(rows):
        for b, count in row:
            table[a, b] += count
    return table / table.sum(axis=1, keepdims=True)


@dataclass
class Draft:
    """What proposes the next byte: the lens (its own one-layer cache, rolled back with the target's) or the
    bigram table (no cache)."""

    model: Model
    kind: str
    capacity: int
    lens: Decoder | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.kind == "lens":
            self.lens = Decoder(self.model, 1, self.capacity)

    def next(self, text: list[int]) -> np.ndarray:
        """[V] q for the byte after `text`: the lens reads what its cache lacks as one block."""
        if self.lens is None:
            return bigram(str(self.model.card_dir))[text[-1]]
        at = self.lens.length
        return self.lens.extend(np.array(text[at:], dtype=np.int64), at)[-1]

    def rollback(self, length: int) -> None:
        if self.lens is not None:
            self.lens.truncate(length)


@dataclass(frozen=True)
class Request:
    prompt: list[int]
    gamma: int
    max_new_tokens: int
    temperature: float
    seed: int
    draft: str
    how: Recipe

    @property
    def capacity(self) -> int:
        """Rows a cache may need: every position, and the rejected drafts a cache left unrolled keeps."""
        return len(self.prompt) + (self.max_new_tokens + 1) * (self.gamma + 2)


def speculate(model: Model, req: Request) -> dict:
    """Rounds until `max_new_tokens` bytes are out: each draft, its verification, its decisions, the byte that
    ends it, the cache before and after the rollback, and each verified position's emitted distribution set
    against p (with `cache_not_rolled_back`, against the p a rolled-back cache gives)."""
    rng, how = np.random.default_rng(req.seed), req.how
    target, draft = Decoder(model, model.layers, req.capacity), Draft(model, req.draft, req.capacity)
    right = Decoder(model, model.layers, req.capacity) if how.rollback == "kept" else None
    text = list(req.prompt)
    for decoder in (target, right):
        if decoder is not None and len(text) > 1:
            decoder.extend(np.array(text[:-1]), 0)  # the prefill: every position before the first to verify
    rounds: list[dict] = []
    while len(text) - len(req.prompt) < req.max_new_tokens:
        rounds.append(one_round(req, text, target, right, draft, rng))
    return {"tokens": text[len(req.prompt) :], "rounds": rounds, "target": target}


def one_round(req: Request, text: list[int], target: Decoder, right: Decoder | None, draft: Draft, rng) -> dict:
    """One round, `text` extended in place by what it emits."""
    # drafts past the bytes still wanted are never made: the last round may verify none (a plain step)
    how, gamma = req.how, min(req.gamma, req.max_new_tokens - (len(text) - len(req.prompt)) - 1)
    drafts: list[dict] = []
    qs: list[np.ndarray] = []
    raw: list[np.ndarray] = []
    for _ in range(gamma):
        q = draft.next(text + [d["byte"] for d in drafts])
        u = float(rng.random())
        raw.append(q)
        qs.append(rule.tempered(q, req.temperature))
        drafts.append({"byte": rule.inverse_cdf(qs[-1], u), "u_draft": u})
    start, before = len(text) - 1, target.length
    block = np.array([text[-1]] + [d["byte"] for d in drafts])
    ps = [rule.tempered(p, req.temperature) for p in target.extend(block, start)]
    exact = [rule.tempered(p, req.temperature) for p in right.extend(block, start)] if right else ps
    emitted, ending = decide(how, drafts, ps, qs, raw, rng)
    verified = ending.pop("verified")
    text.extend(emitted)
    kept = len(text) - 1  # rows before the next byte to verify: the rollback
    if how.rollback == "truncate":
        target.truncate(kept)
    if right is not None:
        right.truncate(kept)
    draft.rollback(kept)
    analysis = [
        {
            "position": start + 1 + i,
            "total_variation": rule.total_variation(emitted_at(how, ps[i], qs, raw, i), exact[i]),
        }
        for i in range(verified)
    ]
    cache = {"before": before, "verified": before + len(block), "after": target.length, "accepted_prefix": kept}
    return {
        "start": start,
        "drafts": drafts,
        "ending": ending,
        "emitted": emitted,
        "cache": cache,
        "positions": analysis,
        "top": top_of(ps, qs, verified),
    }


def decide(how: Recipe, drafts: list[dict], ps: list, qs: list, raw: list, rng) -> tuple[list[int], dict]:
    """Each draft kept with probability min(1, p/q) in order, until one is not: the bytes emitted (the kept
    drafts, then the resampled byte or, all kept, a bonus byte from p) and how many positions were verified."""
    emitted: list[int] = []
    for i, d in enumerate(drafts):
        ratio_q = raw[i] if how.ratio_q == "untempered" else qs[i]
        a = float(rule.acceptance(ps[i], ratio_q)[d["byte"]])
        u = float(rng.random())
        d.update(q=float(qs[i][d["byte"]]), p=float(ps[i][d["byte"]]), acceptance=a, u=u, accepted=u < a)
        if u < a:
            emitted.append(d["byte"])
            continue
        v = u if how.uniform == "shared" else float(rng.random())
        emitted.append(rule.inverse_cdf(rule.RESAMPLE[how.resample](ps[i], ratio_q), v))
        return emitted, {"byte": emitted[-1], "kind": "resampled", "u": v, "verified": i + 1}
    v = float(rng.random())
    emitted.append(rule.inverse_cdf(ps[len(drafts)], v))
    return emitted, {"byte": emitted[-1], "kind": "bonus", "u": v, "verified": len(drafts) + 1}


def emitted_at(how: Recipe, p: np.ndarray, qs: list, raw: list, i: int) -> np.ndarray:
    """[V] what the round emits at its i-th verified position: the rule's (the recipe's) on the draft, p at the
    bonus."""
    return rule.emitted(p, qs[i], how, raw[i]) if i < len(qs) else p


def top_of(ps: list, qs: list, verified: int, top: int = 5) -> list[list[dict]]:
    """At each verified position the `top` likeliest bytes under p, with their p and q (none at the bonus)."""
    rows = []
    for i in range(verified):
        best = np.argsort(-ps[i], kind="stable")[:top]
        q = qs[i] if i < len(qs) else None
        rows.append([{"byte": int(b), "p": float(ps[i][b]), "q": None if q is None else float(q[b])} for b in best])
    return rows


def greedy(model: Model, prompt: list[int], count: int) -> list[int]:
    """The target alone at temperature 0: one position a step over its cache, the likeliest byte each time."""
    target, text = Decoder(model, model.layers, len(prompt) + count), list(prompt)
    p = target.extend(np.array(text), 0)[-1]
    for _ in range(count):
        text.append(int(np.argmax(p)))
        p = target.extend(np.array(text[-1:]), len(text) - 1)[0]
    return text[len(prompt) :]


def first_difference(rounds: list[dict]) -> dict | None:
    """The first round whose emitted distribution parts from p (TV above float rounding), or whose cache holds
    other rows than the accepted prefix's."""
    for index, r in enumerate(rounds):
        worst = max(p["total_variation"] for p in r["positions"])
        if worst > 1e-12:
            return {"round": index, "what": "emitted", "total_variation": worst}
        if r["cache"]["after"] != r["cache"]["accepted_prefix"]:
            return {"round": index, "what": "cache", "total_variation": worst}
    return None


def speculate_body(model: AnyModel, args: dict) -> dict:
    limit = model.context - args["max_new_tokens"]
    # the prompt and every byte to come fit the model's context
    prompt = [int(b) for b in byte_tokens(model, args["prompt"], "prompt", limit, "prompt_bytes")]
    assert isinstance(model, Model)
    slip = args.get("failure_mode")
    keys = ("gamma", "max_new_tokens", "temperature", "seed", "draft")
    done = speculate(model, Request(prompt, **{k: args[k] for k in keys}, how=recipe_of(slip)))
    rounds = [named(r) for r in done["rounds"]]
    drafted = sum(len(r["drafts"]) for r in rounds)
    accepted = sum(bool(d.get("accepted")) for r in rounds for d in r["drafts"])
    only = greedy(model, prompt, args["max_new_tokens"]) if args["temperature"] == 0 else None
    return {
        "model": model.id,
        **{k: args[k] for k in ("draft", "gamma", "temperature", "seed")},
        "failure_mode": slip,
        "prompt": args["prompt"],
        "text": "".join(byte_text(b) for b in done["tokens"]),
        "tokens": as_bytes(done["tokens"]),
        "rounds": rounds,
        "target_passes": len(rounds),
        "drafted": drafted,
        "accepted": accepted,
        "tokens_per_pass": len(done["tokens"]) / len(rounds),
        "target_only": None if only is None else as_bytes(only),
        "first_difference": first_difference(rounds) if slip else None,
    }


def as_bytes(values: list[int]) -> list[dict]:
    return [{"byte": b, "text": byte_text(b)} for b in values]


def named(r: dict) -> dict:
    """A round with each byte's text beside it."""
    with_text = lambda d: {**d, "text": byte_text(d["byte"])}  # noqa: E731
    return {
        **r,
        "drafts": [with_text(d) for d in r["drafts"]],
        "ending": with_text(r["ending"]),
        "emitted": as_bytes(r["emitted"]),
        "top": [[with_text(t) for t in row] for row in r["top"]],
    }
