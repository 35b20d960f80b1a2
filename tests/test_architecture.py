"""The layout holds: no import cycle inside service/, the engine free of Flask and the database,
and modules and functions small enough to read in one sitting (docs/architecture.md)."""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[1] / "service"


def module_name(path: Path) -> str:
    parts = path.relative_to(SERVICE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Every service module `path` imports, at the top or inside a function. `from pkg import mod`
    depends on `pkg.mod`, and on `pkg` itself only for names that are not modules."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = [f"{target}.{alias.name}" for alias in node.names]
            candidates = [m for m in submodules if m in modules]
            if len(candidates) < len(submodules):
                candidates.append(target)
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c.startswith("service"))
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in SERVICE.rglob("*.py")}
    return {
        name: {m for m in imports_of(path, set(modules)) if m in modules and m != name}
        for name, path in modules.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_is_read_from_the_code():
    edges = graph()
    assert "service.api.attention.traces" in edges["service.api.attention.views"]
    assert "service.compute.engine" in edges["service.compute"]


def test_nothing_below_the_api_imports_it():
    """Imports run down: only the app that wires everything (and the API itself) imports service.api."""
    upward = {
        (module, dep)
        for module, deps in graph().items()
        for dep in deps
        if dep.startswith("service.api") and not module.startswith("service.api") and module != "service.app"
    }
    assert upward == set()


def test_the_edge_knows_no_resource():
    """The edge counts requests and budgets; a resource's caps, cost and stores are the resource's own."""
    for module, deps in graph().items():
        if module.startswith("service.edge"):
            rooms = {d for d in deps if d.split(".")[1] in ("api", "compute", "models", "exercise", "lessons", "lti")}
            assert rooms == set(), module
    words = ("max_tokens", "max_heads", "max_d_model", "max_score_cells", "refuse_over_caps", "def mark", "marked(")
    for path in (SERVICE / "edge").rglob("*.py"):
        assert not [w for w in words if w in path.read_text()], path


# The lesson's maths, and nothing else (docs/architecture.md): models, the exercise's checker and
# the process tuning have rooms of their own.
COMPUTE = {
    "__init__",
    "cache_memory",
    "config",
    "conventions",
    "decode",
    "divergence",
    "engine",
    "errors",
    "failure_modes",
    "fused",
    "inputs",
    "kv",
    "latent",
    "masks",
    "online",
    "parallel",
    "pipeline",
    "reference",
    "rope",
    "scaling",
    "speculative",
    "steps",
    "trace",
    "weights",
}


def test_compute_holds_only_the_maths():
    assert {p.stem for p in (SERVICE / "compute").glob("*.py")} <= COMPUTE


# Where a call's variant may be named: the seam and latent attention's own maths, the spec written
# out per head, and the config and inputs that choose it once; cache_memory sizes caches, not a pass.
KNOWS_THE_VARIANT = {"kv", "latent", "reference", "config", "inputs", "cache_memory", "weights"}
VARIANT_WORDS = {
    "latent",
    "absorbed",
    "kv_heads",
    "variant",
    "Grouped",
    "GroupedHeads",
    "LatentShape",
    "LatentSource",
    "AbsorbedLatent",
}


def conditions(source: str) -> list[ast.expr]:
    """Every condition of a module: if, a conditional expression, while, a comprehension's if, assert, match."""
    found: list[ast.expr] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            found.append(node.test)
        elif isinstance(node, ast.comprehension):
            found.extend(node.ifs)
        elif isinstance(node, ast.Match):
            found.append(node.subject)
    return found


def named_in_conditions(source: str, words: set[str]) -> list[int]:
    """The lines of a condition that names one of `words` (an attribute, a name or a string)."""
    hits = set()
    for condition in conditions(source):
        for node in ast.walk(condition):
            named = getattr(node, "attr", None) or getattr(node, "id", None) or getattr(node, "value", None)
            if isinstance(named, str) and named in words:
                hits.add(node.lineno)
    return sorted(hits)


def variant_tests(source: str) -> list[int]:
    """Where a module asks which variant it holds; calling the seam and passing `latent` on are not asking."""
    return named_in_conditions(source, VARIANT_WORDS)


def test_only_the_seam_tells_the_attention_variants_apart():
    for path in (SERVICE / "compute").glob("*.py"):
        if path.stem not in KNOWS_THE_VARIANT:
            assert variant_tests(path.read_text()) == [], f"{path.name} asks which variant it holds"


def test_a_variant_test_outside_the_seam_would_be_found():
    assert variant_tests('if engine.get("latent", {}).get("absorbed"):\n    pass\n') == [1]
    assert variant_tests("if cfg.kv_heads == cfg.heads:\n    pass\n") == [1]
    assert variant_tests("y = x if isinstance(source, LatentSource) else 0\n") == [1]
    assert (
        variant_tests('"""A latent, absorbed or not."""\nsource = cfg.variant.source(cfg, latent)  # cfg.latent\n')
        == []
    )


def test_the_decodes_correct_path_asks_no_failure_mode():
    """The broken decodes are functions the recipe's data chooses (decode.APPEND, QUERY_AT, ROTATE_AT,
    RENUMBER), not branches inside the correct one."""
    source = (SERVICE / "compute" / "decode.py").read_text()
    assert named_in_conditions(source, {"recipe", "how", "failure_mode", "mode", "slip"}) == []
    assert named_in_conditions('if cfg.recipe.renumber == "query_only":\n    pass\n', {"recipe"}) == [1]


def test_the_pass_does_not_import_the_decode():
    """The decode is more steps of the pass (decode.py imports the engine), never the other way round."""
    edges = graph()
    assert "service.compute.decode" not in edges["service.compute.engine"]
    assert "service.compute.decode" not in edges["service.compute.pipeline"]


def test_the_seam_is_typed():
    """The key/value sources share one Protocol and take a typed config and weights: no `Any` in kv.py
    (mypy checks each source against the Protocol where `source_of` returns it)."""
    source = (SERVICE / "compute" / "kv.py").read_text()
    assert "class KeyValueSource(Protocol)" in source
    assert re.search(r"\bAny\b", source) is None


def failure_mode_ids_named(source: str, ids: set[str]) -> list[str]:
    """Every failure mode's id a module spells out as a string."""
    return sorted({n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and n.value in ids})


def test_no_module_of_the_engine_but_the_registry_and_the_spec_names_a_failure_mode():
    """A mode enters through its registry entry (its recipe and needs); the modules that apply a step read
    tables keyed by the recipe's fields, never a mode's id."""
    from service.compute.failure_modes import REGISTRY

    for path in (SERVICE / "compute").glob("*.py"):
        if path.stem not in ("failure_modes", "reference"):
            assert failure_mode_ids_named(path.read_text(), set(REGISTRY)) == [], path.name
    assert failure_mode_ids_named('if mode == "gqa_tiled":\n    pass\n', set(REGISTRY)) == ["gqa_tiled"]


def test_the_pages_know_no_failure_mode_but_through_the_api():
    """The pages read each mode's needs, step and words from GET /api/v1/failure-modes; the only id a
    script spells is the workbench's own broken toggle, the seed's "Reuse head 1 features"."""
    from service.compute.failure_modes import REGISTRY

    pattern = re.compile("|".join(sorted(REGISTRY, key=len, reverse=True)))
    for path in (SERVICE.parent / "frontend" / "js").rglob("*.js"):
        named = set(pattern.findall(path.read_text())) - {"reuse_first_slice"}
        assert named == set(), path.name


def test_no_import_cycle_inside_service():
    assert cycles(graph()) == []


def test_a_cycle_would_be_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_engine_imports_neither_flask_nor_the_database():
    for path in (SERVICE / "compute").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
        assert not {m for m in names if m.split(".")[0] in ("flask", "sqlalchemy", "marshmallow")}, path


MODULE_LINES, FUNCTION_LINES = 400, 50
# Exceptions, by name, each with its reason (none is silent):
LONG_MODULES: dict[str, str] = {}
LONG_FUNCTIONS: dict[str, str] = {}
# The declared tables: the only statements that may stay packed (`# fmt: skip`, one entry a line, read as
# a table). Every other line is counted as the project's `ruff format` writes it.
TABLES = {"compute/failure_modes.py": "_MODES", "compute/cache_memory.py": "PRESETS"}
SKIP = re.compile(r"[ \t]*#\s*fmt:\s*skip\b.*$")


def markers(text: str) -> list[int]:
    """The lines whose comment is a `# fmt: skip` marker (a string that spells one is not)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [t.start[0] for t in tokens if t.type == tokenize.COMMENT and SKIP.fullmatch(t.string)]


def table_end(text: str, name: str) -> int:
    """The last line of the module-level statement that assigns `name` (where its marker stands)."""
    for node in ast.parse(text).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node.end_lineno or 0
    raise AssertionError(f"the declared table {name} is not where docs/architecture.md says")


def unpacked(path: Path) -> str:
    """A module's text with every `# fmt: skip` marker stripped but the one on its declared table."""
    text = path.read_text()
    kept = table_end(text, TABLES[module]) if (module := path.relative_to(SERVICE).as_posix()) in TABLES else None
    packed = set(markers(text)) - {kept}
    lines = text.split("\n")
    return "\n".join(SKIP.sub("", line) if i in packed else line for i, line in enumerate(lines, start=1))


@functools.cache
def formatted() -> dict[Path, str]:
    """Every module of service/ as `ruff format` writes it (with the project's settings), markers stripped
    but on the declared tables: what the budgets, the module cap and the function cap count."""
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed (the dev extra: make test installs it)")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "service"
        for path in SERVICE.rglob("*.py"):
            target = copy / path.relative_to(SERVICE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(unpacked(path))
        shutil.copy(SERVICE.parent / "pyproject.toml", scratch)
        subprocess.run([str(ruff), "format", "--quiet", "service"], cwd=scratch, check=True)
        return {SERVICE / p.relative_to(copy): p.read_text() for p in copy.rglob("*.py")}


def test_fmt_skip_stands_only_on_the_declared_tables():
    """Code is counted as `ruff format` writes it: a budget is a reason to delete, never to pack."""
    root = SERVICE.parent
    for folder in ("service", "tests", "bench", "exercises", "training"):
        for path in (root / folder).rglob("*.py"):
            packed = markers(path.read_text())
            module = path.relative_to(SERVICE).as_posix() if path.is_relative_to(SERVICE) else None
            allowed = [table_end(path.read_text(), TABLES[module])] if module in TABLES else []
            assert packed == allowed, f"{path.relative_to(root)}: fmt: skip on lines {packed}"


def test_the_count_is_of_formatted_code():
    assert markers("x = [\n    1, 2,\n]  # fmt: skip\ny = '# fmt: skip'\n") == [3]
    assert markers(unpacked(SERVICE / "compute" / "failure_modes.py")) == [
        table_end((SERVICE / "compute" / "failure_modes.py").read_text(), "_MODES")
    ]  # the table's own, only


def test_modules_and_functions_stay_small():
    """Counted as `ruff format` writes them: 400 lines a module, 50 a function."""
    too_long = []
    for path, text in formatted().items():
        name = str(path.relative_to(SERVICE))
        if len(text.splitlines()) > MODULE_LINES and name not in LONG_MODULES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.end_lineno - node.lineno >= FUNCTION_LINES
            ):
                if f"{name}:{node.name}" not in LONG_FUNCTIONS:
                    too_long.append(f"{name}:{node.lineno} {node.name}")
    assert too_long == []


JS_MODULE_LINES, JS_FUNCTION_LINES = 400, 60
FRONTEND_JS = SERVICE.parent / "frontend" / "js"


@functools.cache
def js_sizes() -> list[dict]:
    """Every front-end module's lines and each of its functions' (TypeScript's parser reads them:
    tests/support/js_sizes.mjs), as committed: `make lint` holds them formatted by Biome."""
    root = SERVICE.parent
    node = shutil.which("node")
    if node is None or not (root / "node_modules" / "typescript").is_dir():
        pytest.skip("the front end's sizes need Node and the dev packages (pnpm install; make test runs it)")
    files = sorted(str(p.relative_to(root)) for p in FRONTEND_JS.rglob("*.js"))
    found = subprocess.run([node, "tests/support/js_sizes.mjs", *files], cwd=root, capture_output=True, check=True)
    return json.loads(found.stdout)


def test_the_front_ends_modules_and_functions_stay_small():
    """As the formatter writes them: 400 lines a module, 60 a function (a nested one counts inside its parent)."""
    too_long = [f"{m['file']}: {m['lines']} lines" for m in js_sizes() if m["lines"] > JS_MODULE_LINES]
    too_long += [
        f"{m['file']}:{f['line']} {f['name']} ({f['lines']} lines)"
        for m in js_sizes()
        for f in m["functions"]
        if f["lines"] > JS_FUNCTION_LINES
    ]
    assert too_long == []
    assert any(f["lines"] > 20 for m in js_sizes() for f in m["functions"])  # the parser sees functions


def test_every_page_starts_with_the_one_shell_and_every_module_is_type_checked():
    """The element lookup, the announcer, the host's height, the outbox and the experiment are the shell's
    (frontend/js/shell.js): no page writes its own; every module is `// @ts-check` (make lint runs tsc)."""
    for path in FRONTEND_JS.rglob("*.js"):
        text = path.read_text()
        assert text.startswith("// @ts-check\n"), path.name
        if path.name != "shell.js":
            assert "const $ = " not in text and "function $(" not in text, path.name
    for page in (FRONTEND_JS / "pages").glob("*.js"):
        text = page.read_text()
        assert 'from "../shell.js"' in text and "startPage(" in text, page.name
        assert "reportHeight(" not in text and "announcer(" not in text and "startOutbox(" not in text, page.name


def rooms() -> list[str]:
    """The rooms of docs/architecture.md's table, as paths under service/ (a folder ends in /)."""
    table = ARCHITECTURE.split("## The rooms", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3:
            found += [p.removeprefix("service/") for p in re.findall(r"`(service/[^`]*)`", cells[0])]
    return found


def room_of(path: str, every: list[str]) -> str | None:
    """The deepest room holding `path` (relative to service/): a file of its own, or its folder."""
    holding = [r for r in every if path == r or (r.endswith("/") and path.startswith(r))]
    return max(holding, key=len) if holding else None


# What the workbench's request measures, from the edge to the engine and back (docs/architecture.md).
REQUEST_ROOMS, REQUEST_CROSSINGS = 5, 12


def test_a_workbench_post_crosses_few_rooms_and_between_them_rarely(tmp_path):
    """What one edit of the workbench runs, from the edge to the engine and back (rate limits on, as
    served): the rooms it enters and the calls from one room into another, a call from outside the
    service (the server calling the edge) included, each at most what the path measured once the
    variants had their seam and the traces one JSON form."""
    import json
    import sys

    from service.app import create_app
    from service.db.migrate import upgrade
    from service.presets import presets

    url = f"sqlite:///{tmp_path / 'wb.db'}"
    upgrade(url)
    app = create_app({"env": "testing", "database_url": url, "ratelimit_enabled": True})
    client = app.test_client()
    body = json.dumps(presets()["workbench"]["request"])
    client.post("/api/v1/attention", data=body, content_type="application/json")  # caches warm, as in service
    calls: list[tuple[str, str | None]] = []
    root = str(SERVICE)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(root):
            caller = frame.f_back.f_code.co_filename if frame.f_back else ""
            calls.append((frame.f_code.co_filename, caller if caller.startswith(root) else None))

    sys.setprofile(profile)
    try:
        answer = client.post("/api/v1/attention", data=body, content_type="application/json")
    finally:
        sys.setprofile(None)
    assert answer.status_code == 200
    every = rooms()

    def room(file: str | None) -> str | None:
        return None if file is None else room_of(Path(file).relative_to(SERVICE).as_posix(), every)

    entered = {room(f) for f, _ in calls}
    assert None not in entered, sorted(Path(f).relative_to(SERVICE).as_posix() for f, _ in calls if room(f) is None)
    crossings = [(room(caller), room(f)) for f, caller in calls if room(caller) != room(f)]
    assert len(entered) <= REQUEST_ROOMS, sorted(entered)
    assert len(crossings) <= REQUEST_CROSSINGS, "\n".join(map(str, crossings))
    app.extensions["db"].dispose()


def test_every_room_of_the_table_is_a_place_in_service():
    for room in rooms():
        assert (SERVICE / room).exists(), room


def test_no_view_runs_sql():
    for path in (SERVICE / "api").rglob("*.py"):
        text = path.read_text()
        assert "from sqlalchemy import" not in text and ".execute(" not in text, path


FOLDERS = "service|tests|bench|frontend|migrations|exercises|content|training|deploy|docs"
PATH_NAMED = re.compile(
    rf"(?<![\w/.{{])((?:{FOLDERS})/[\w./-]+\.(?:py|md|sql|js|css|html|json|toml|conf|yml|txt|ts))(?![\w{{])"
)
EXERCISES = [
    SERVICE.parent / "exercises" / name for name in ("multi-head-attention", "online-softmax")
]  # paths inside a
# download are relative to its exercise


def missing_paths(texts) -> list[str]:
    root = SERVICE.parent
    return sorted(
        f"{name}: {path}"
        for name, text in texts
        for path in set(PATH_NAMED.findall(text))
        if not (root / path).exists() and not any((exercise / path).exists() for exercise in EXERCISES)
    )


def test_the_docs_name_only_files_the_repository_has():
    """Every repository path the docs mention (with a file's extension) exists, so a doc cannot
    keep pointing at a module that moved or went; docs/decisions.md (current decisions) included."""
    root = SERVICE.parent
    docs = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    assert missing_paths((doc.name, doc.read_text()) for doc in docs if doc.name != "history.md") == []


def test_the_codes_comments_and_docstrings_name_only_files_the_repository_has():
    root = SERVICE.parent
    code = [
        path
        for folder in ("service", "frontend", "tests", "bench", "exercises", "training", "migrations")
        for path in (root / folder).rglob("*")
        if path.suffix in (".py", ".js", ".ts", ".html", ".css", ".sql") and "node_modules" not in path.parts
    ]
    assert missing_paths((str(path.relative_to(root)), path.read_text()) for path in code) == []


# Figures more than one of these files states: each must say the same in all of them.
FIGURES = {
    "MiniLM's memory per worker": r"(\d+) MB (?:more memory in each worker|per worker)",
    "MiniLM's download": r"(\d+(?:\.\d+)?) MB (?:wheel|to download)",
}


def test_the_readme_the_makefile_and_the_models_doc_agree_on_every_figure_they_share():
    root = SERVICE.parent
    texts = {name: (root / name).read_text() for name in ("README.md", "Makefile", "docs/models.md")}
    for figure, pattern in FIGURES.items():
        stated = {name: set(re.findall(pattern, text)) for name, text in texts.items() if re.search(pattern, text)}
        assert len(stated) >= 2 and len(set().union(*stated.values())) == 1, (figure, stated)


# -- the docs' architecture is the code's (docs/architecture.md)

ARCHITECTURE = (SERVICE.parent / "docs" / "architecture.md").read_text()


def diagram_layers() -> list[list[str]]:
    """The layers block under '## Layers': each line's paths, top line first."""
    block = ARCHITECTURE.split("## Layers", 1)[1].split("```", 2)[1]
    return [line.split() for line in block.strip().splitlines()]


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    path = module.replace(".", "/")
    for depth, paths in enumerate(layers):
        for entry in paths:
            room = entry.removesuffix("/").removesuffix(".py")
            if path == room or path.startswith(room + "/"):
                return depth
    return None


def test_the_diagram_names_every_room_and_no_import_runs_up_it():
    layers = diagram_layers()
    edges = graph()
    unplaced = sorted(m for m in edges if m != "service" and layer_of(m, layers) is None)
    assert unplaced == []
    depth = {m: layer_of(m, layers) for m in edges if m != "service"}
    upward = sorted(f"{m} -> {d}" for m, deps in edges.items() for d in deps if d in depth and depth[d] < depth[m])
    assert upward == []


def budget_rows() -> list[tuple[str, list[str], int]]:
    section = ARCHITECTURE.split("## Scope budget", 1)[1].split("###", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3].replace(",", "").isdigit():
            rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1]), int(cells[3].replace(",", ""))))
    return rows


def concern_files(rows) -> dict[str, set[Path]]:
    """Each concern's Python files; `service/api/` (the rest) is what no other row claims there."""
    claimed: dict[str, set[Path]] = {}
    for name, paths, _ in rows:
        files: set[Path] = set()
        for path in paths:
            target = SERVICE.parent / path
            files |= set(target.rglob("*.py")) if target.is_dir() else {target}
        claimed[name] = files
    for name, paths, _ in rows:
        if "service/api/" in paths:  # the rest of the API
            others = set().union(*(f for n, f in claimed.items() if n != name))
            claimed[name] = {f for f in claimed[name] if f not in others or not f.is_relative_to(SERVICE / "api")}
    return claimed


def test_every_concern_keeps_its_written_budget_and_every_file_has_one():
    rows = budget_rows()
    assert len(rows) == 3
    claimed = concern_files(rows)
    every = set(SERVICE.rglob("*.py"))
    assert sorted(str(f.relative_to(SERVICE)) for f in every - set().union(*claimed.values())) == []
    lines_of = {path: len(text.splitlines()) for path, text in formatted().items()}
    for name, _, budget in rows:
        lines = sum(lines_of[f] for f in claimed[name])
        assert lines <= budget, f"{name}: {lines} lines, over its budget of {budget}"
        assert budget <= lines * 1.02, f"{name}: a budget of {budget} for {lines} lines binds nothing: at most 2% above"


def third_party_names() -> set[str]:
    """Every class of another package the service subclasses, and every module attribute it
    replaces (marshmallow's and SQLAlchemy's declarative bases and Flask's MethodView are how
    those libraries are used, not extensions of them)."""
    import importlib.util
    import sys

    stdlib = set(sys.stdlib_module_names)
    found: set[str] = set()
    for path in SERVICE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
            elif isinstance(node, ast.Import):
                names.update(
                    {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names}
                )

        def resolve(expr, names: dict[str, str] = names) -> str | None:
            if isinstance(expr, ast.Name):
                return names.get(expr.id)
            if isinstance(expr, ast.Attribute):
                base = resolve(expr.value)
                return f"{base}.{expr.attr}" if base else None
            return resolve(expr.value) if isinstance(expr, ast.Subscript) else None

        def foreign(name: str | None) -> bool:
            return bool(name) and name.split(".")[0] not in stdlib | {"service"}

        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [resolve(b) for b in node.bases]
                found |= {
                    b for b in bases if foreign(b) and not b.startswith(("marshmallow", "sqlalchemy", "flask.views"))
                }
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    module = resolve(target.value) if isinstance(target, ast.Attribute) else None
                    if foreign(module) and importlib.util.find_spec(module) is not None:  # a module, not an object
                        found.add(f"{module}.{target.attr}")
    return found


def test_every_third_party_internal_subclassed_or_patched_is_listed_with_why_and_its_test():
    section = ARCHITECTURE.split("### Third-party internals subclassed or patched", 1)[1]
    listed = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            listed[cells[0].strip("`")] = cells
    found = third_party_names()
    assert sorted(found - set(listed)) == [], "subclassed or patched, not listed in docs/architecture.md"
    assert sorted(set(listed) - found) == [], "listed, but the code no longer does it"
    for name, cells in listed.items():
        test = re.findall(r"`(tests/[^`:]+)", cells[4])
        assert test and all((SERVICE.parent / t).exists() for t in test), name


def test_the_decisions_are_current_and_readable_in_one_sitting():
    """docs/decisions.md holds the decisions that hold now (history.md keeps the rest)."""
    text = (SERVICE.parent / "docs" / "decisions.md").read_text()
    assert len(text.splitlines()) <= 500
    assert "superseded" not in text.lower()


def test_no_two_test_files_share_a_name():
    """The tests mirror the rooms; a name says which test file is meant wherever it is named."""
    names = sorted(p.name for p in (SERVICE.parent / "tests").rglob("test_*.py"))
    assert sorted({n for n in names if names.count(n) > 1}) == []
