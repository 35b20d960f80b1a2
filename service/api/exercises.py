"""The exercises' resources: diagnose a learner's output (no learner code runs here), and the
whole exercise to download, one bundle per language: `multi-head-attention` (Python and TypeScript)
and `online-softmax` (Python and TypeScript). `POST /exercises/multi-head-attention/check` and
`POST /exercises/online-softmax/check`, `GET /exercises/multi-head-attention/mistakes` and
`GET /exercises/online-softmax/mistakes`, `GET /exercises/{exercise}/starter.{suffix}` and
`GET /exercises/{exercise}/{language}.zip`."""

from __future__ import annotations

import functools
import hashlib
import io
import zipfile
from typing import Any

from flask import current_app, request, send_from_directory
from flask.views import MethodView

from ..compute import AttentionInputError
from ..compute.online import SLIPS
from ..config import ROOT
from ..db import challenges as challenges_db
from ..db.quotas import ROW_BYTES, Stored
from ..edge import EdgeRequest, costs
from ..edge.caller import CALLER
from ..edge.json_codec import dumps_bytes
from ..edge.problems import Problem
from ..exercise.diagnose import MISTAKES, diagnose, traces_per_diagnosis
from ..exercise.online import RUNS, diagnose_online
from ..i18n import speaker
from . import storage
from .attention import offload as heavy
from .attention.caps import cost, most, tiled_size
from .auth import authorized, needs
from .schemas.exercises import CheckResultSchema, CheckSchema, MistakesSchema, OnlineCheckSchema
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "exercises",
    __name__,
    url_prefix="/api/v1/exercises",
    description="The lessons' exercises: diagnose an output, download the exercise (README, starter, tests, "
    "trace script, and for multi-head attention a submit script) for Python or TypeScript.",
)

LESSON = "multi-head-attention"
_HERE = "exercises/multi-head-attention/"
_ONLINE = "exercises/online-softmax/"
# What a learner needs, laid out as in this repository, so the README's commands work as written
# in the unpacked folder: Python needs numpy (and pytest for the tests), TypeScript Node 20 and pnpm.
BUNDLES: dict[str, dict[str, tuple[str, ...]]] = {
    "multi-head-attention": {
        "python": tuple(
            _HERE + name
            for name in (
                "README.md",
                "README.es.md",
                "README.zh-CN.md",
                "starter.py",
                "learner.py",
                "submit.py",
                "trace.py",
                "pytest.ini",
                "tests/conftest.py",
                "tests/mistakes.py",
                "tests/test_multi_head_attention.py",
                "tests/messages.json",
                "tests/messages.es.json",
                "tests/messages.zh-CN.json",
            )
        ),
        "typescript": (
            "package.json",
            "pnpm-lock.yaml",
            "pnpm-workspace.yaml",
            "vitest.exercise.config.ts",
            "tsconfig.json",
            *(
                _HERE + name
                for name in (
                    "README.md",
                    "README.es.md",
                    "README.zh-CN.md",
                    "starter.ts",
                    "learner.ts",
                    "submit.ts",
                    "trace.ts",
                    "tests/mistakes.ts",
                    "tests/multi-head-attention.test.ts",
                    "tests/messages.json",
                    "tests/messages.es.json",
                    "tests/messages.zh-CN.json",
                )
            ),
        ),
    },
    "online-softmax": {
        "python": tuple(
            _ONLINE + name
            for name in (
                "README.md",
                "README.es.md",
                "README.zh-CN.md",
                "starter.py",
                "submit.py",
                "trace.py",
                "pytest.ini",
                "tests/conftest.py",
                "tests/slips.py",
                "tests/test_online_softmax.py",
            )
        ),
        "typescript": (
            "package.json",
            "pnpm-lock.yaml",
            "pnpm-workspace.yaml",
            "vitest.exercise.config.ts",
            "tsconfig.json",
            *(
                _ONLINE + name
                for name in (
                    "README.md",
                    "README.es.md",
                    "README.zh-CN.md",
                    "starter.ts",
                    "submit.ts",
                    "trace.ts",
                    "tests/slips.ts",
                    "tests/online-softmax.test.ts",
                )
            ),
        ),
    },
}


def diagnosis_cells(req: EdgeRequest) -> int | None:
    """What a diagnosis charges: one trace's cells for the correct result and each combination of
    mistakes it tries (the largest case tries a few hundred); a body too large to parse here, the
    most a diagnosis may cost."""
    if not req.parsed:
        return most(req.app.extensions["settings"]) * traces_per_diagnosis(True, False)
    try:
        case = req.data["case"]
        tokens, heads, causal = case["tokens"], case["heads"], case.get("causal", True)
        if type(heads) is not int or not tokens or type(tokens[0]) is not list:
            return None
        return cost(tokens, heads) * traces_per_diagnosis(bool(causal), False)
    except (KeyError, TypeError, IndexError):
        return None  # not a check body: the schema says what is wrong


def online_cells(req: EdgeRequest) -> int | None:
    """What an online-softmax check charges: its case's tiles and plain pass, once per loop it may run."""
    if not req.parsed:
        return most(req.app.extensions["settings"]) * RUNS
    try:
        case = req.data["case"]
        size = tiled_size({**case, "heads": 1})
        return None if size is None else (size[1] + cost(case["tokens"], 1)) * RUNS
    except (KeyError, TypeError, IndexError):
        return None  # not a check body: the schema says what is wrong


@blp.route("/multi-head-attention/check")
class Check(MethodView):
    @costs(diagnosis_cells)
    @needs("events:write", optional=True)
    @blp.arguments(
        CheckSchema(),
        example={
            "case": {"tokens": [[1, 0], [0, 1]], "heads": 2, "causal": True},
            "output": {
                "weights": [[[1, 0], [0.5, 0.5]], [[1, 0], [0.2689414, 0.7310586]]],
                "head_outputs": [[[1], [0.5]], [[0], [0.7310586]]],
                "concatenated": [[1, 0], [0.5, 0.7310586]],
            },
        },
    )
    @blp.response(200, CheckResultSchema)
    @blp.problems(401, 403, 503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Check a learner's output for a case and name the mistake it shows, if a known one"""
        case, output = args["case"], args["output"]
        try:
            result = heavy.computed(diagnose, case["tokens"], case["heads"], case["causal"], output)
        except AttentionInputError as exc:
            raise Problem(422, str(exc), errors={exc.field or "case": [str(exc)]}) from None
        kept = {"tokens": case["tokens"].tolist(), "heads": case["heads"], "causal": case["causal"]}
        return _answer(args, LESSON, kept, result)


@blp.route("/online-softmax/check")
class OnlineCheck(MethodView):
    @costs(online_cells)
    @needs("events:write", optional=True)
    @blp.arguments(
        OnlineCheckSchema(),
        example={
            "case": {"tokens": [[1, 0], [0, 1], [1, 1]], "causal": True, "block_q": 2, "block_k": 2},
            "output": {
                "output": [[1, 0], [0.33023845, 0.66976155], [0.66666667, 0.66666667]],
                "lse": [0.70710678, 1.10794031, 2.51282585],
            },
        },
    )
    @blp.response(200, CheckResultSchema)
    @blp.problems(401, 403, 503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Check a learner's online softmax (output and L) for a case and name the slips it shows"""
        case, output = args["case"], args["output"]
        try:
            blocks = (case["block_q"], case["block_k"])
            result = heavy.computed(
                diagnose_online, case["tokens"], case["causal"], *blocks, output["output"], output.get("lse")
            )
        except AttentionInputError as exc:
            raise Problem(422, str(exc), errors={exc.field or "case": [str(exc)]}) from None
        kept = {
            "tokens": case["tokens"].tolist(),
            "causal": case["causal"],
            "block_q": case["block_q"],
            "block_k": case["block_k"],
        }
        return _answer(args, "online-softmax", kept, result)


def _answer(args: dict[str, Any], lesson: str, kept: dict[str, Any], result) -> dict[str, Any]:
    """A check's answer, the diagnosis kept for an identified learner."""
    principal = authorized()
    learner = None
    if principal is not None:
        if args.get("learner") and not principal.may_act_for(args["learner"]):
            raise Problem(403, "a browser session checks for its own learner only", slug="forbidden")
        learner = principal.learner or args.get("learner")
    recorded = principal is not None and learner is not None
    if principal is not None and learner is not None:
        _record(principal.platform_id, learner, lesson, kept, result)
    return {
        "correct": result.correct,
        "max_abs_error": result.max_abs_error,
        "diagnosis": result.diagnosis,
        "mistakes": list(result.mistakes),
        "message": result.said(speaker()),
        "recorded": recorded,
    }


def _record(platform_id: int, learner: str, lesson: str, kept: dict[str, Any], result) -> None:
    """Keep the diagnosis for analytics, within the storage quotas (a check counts as one stored
    record and its case's bytes). A check never completes the checkpoint: the learner chose the
    case and could have copied the numbers; a challenge (random cases) is what verifies."""
    stored = [Stored(learner, ROW_BYTES + len(dumps_bytes(kept)))]
    counting = storage.counted(current_app, request.environ[CALLER])
    storage.check(current_app, platform_id, stored, counting)
    with current_app.extensions["db"].write() as session:
        challenges_db.add_check(
            session, platform_id, learner, lesson, kept, result.correct, result.max_abs_error, list(result.mistakes)
        )
        storage.count_in(session.connection(), platform_id, stored, counting)


@blp.route("/multi-head-attention/mistakes")
class Mistakes(MethodView):
    @blp.response(200, MistakesSchema)
    def get(self):
        """The mistakes the checker recognises, with the message a learner sees"""
        return {"mistakes": MISTAKES}


@blp.route("/online-softmax/mistakes")
class OnlineMistakes(MethodView):
    @blp.response(200, MistakesSchema)
    def get(self):
        """The slips the online-softmax checker recognises, with the message a learner sees"""
        return {"mistakes": {m: MISTAKES[m] for m in SLIPS}}


@blp.route("/<any('multi-head-attention', 'online-softmax'):exercise>/starter.<any(py, ts):suffix>")
class Starter(MethodView):
    @blp.response(200, content_type="text/plain", description="The starter file (starter.py or starter.ts)")
    def get(self, exercise, suffix):
        """Download an exercise's starter alone"""
        mimetype = "text/x-python" if suffix == "py" else "text/plain"
        return send_from_directory(
            ROOT / "exercises" / exercise, f"starter.{suffix}", mimetype=mimetype, as_attachment=True
        )


@blp.route("/<any('multi-head-attention', 'online-softmax'):exercise>/<any(python, typescript):language>.zip")
class Bundle(MethodView):
    @blp.response(200, content_type="application/zip", description="The whole exercise for one language")
    def get(self, exercise, language):
        """Download a whole exercise: README, starter, tests, trace (and submit) scripts"""
        data, etag = bundle(exercise, language)
        response = current_app.response_class(data, mimetype="application/zip")
        response.headers["Content-Disposition"] = f"attachment; filename={exercise}-{language}.zip"
        response.set_etag(etag)
        response.cache_control.max_age = 300
        return response.make_conditional(request)


@functools.cache
def bundle(exercise: str, language: str) -> tuple[bytes, str]:
    """(the zip, its ETag): the files under one folder, stamped with a fixed date so the same
    files always make the same bytes."""
    folder = f"{exercise}-{language}/"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in BUNDLES[exercise][language]:
            info = zipfile.ZipInfo(folder + name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, (ROOT / name).read_bytes())
    data = buffer.getvalue()
    return data, hashlib.sha256(data).hexdigest()[:32]
