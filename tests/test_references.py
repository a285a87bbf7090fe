"""Every reference resolves inside the repository, and the original specification has its name.

Two rules of docs/design.md §10, checked on the text of the code, the README, the changelog,
the action and the pages under docs/:

* a file, folder or document that the text names (``docs/noise.md §2``, ``tests/…py``,
  ``benchmarks/ab.py``, ``:mod:`perfgate.core.noise```, a target such as G9) exists in the
  repository, and a section it cites (``§N``) is a heading of that page;
* "seed" means a random seed: the document perfgate started from is "the original
  specification", never "the seed".

The tests, benchmarks and scripts are held to the document rules (no design or research
notes outside the repository, sections that exist) but may name files they create.
Each rule is also run on planted bad text, so the check is known to be able to fail.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# a path from the repository root: one of its top-level folders, then the rest; not part of
# a longer path or a dotted name (".perfgate/noise.json" is a user's folder, not perfgate/)
_TOP = r"(?:docs|tests|benchmarks|scripts|perfgate|dashboards|benchmark_results|data|\.github|\.ci)"
_PATH = re.compile(r"(?<![\w./\-~$])(" + _TOP + r"/[\w.*/\-]*[\w*/])")
# a Markdown file named without a folder
_BARE_MD = re.compile(r"(?<![\w./\-])([\w\-]+\.md)\b")
# a section reference after a document: docs/noise.md §2, ``docs/noise.md`` §2, (docs/design.md §9, §10)
_SECTION = re.compile(r"([\w./\-]+\.md)[`'\")\]]*\s*((?:§\s?\d+(?:\.\d+)?(?:\s*(?:,|and|or)\s*)?)+)")
_SECTION_NUMBER = re.compile(r"§\s?(\d+)")
_MODULE = re.compile(r":mod:`~?(perfgate(?:\.\w+)*)`")
_TARGET = re.compile(r"\bG(\d{1,2})\b")
# documents outside the repository, as older text named them
_OUTSIDE = [
    (re.compile(r"\bDESIGN\b"), "a design document outside the repository; cite docs/design.md §N"),
    (re.compile(r"(?<![\w.])shared/"), "a folder outside the repository; cite the page under docs/"),
    (re.compile(r"\bresearch(?: note|/)", re.IGNORECASE), "a research note outside the repository; cite docs/ §N"),
    (re.compile(r"\bSTYLE\.md\b"), "a style guide outside the repository"),
]
# output files in command examples (perfgate writes them; they are not references)
_OUTPUT_NAMES = {"report.md", "regression_report.md", "regression_report_slower.md", "comment.md", "REPORT.md"}
_OUTPUT_PATHS = re.compile(r"benchmark_results/\w+_current\.json")

# "seed" as a word of prose (not an identifier such as ``seed_files`` or ``args.seed``)
_SEED_WORD = re.compile(r"(?<![\w.])seeds?(?:'s)?(?!\w)", re.IGNORECASE)
# ...where it is a random seed: "a seed", "same seed", "its seed", "(seed 7)", "(seed {args.seed})"
_RANDOM_BEFORE = re.compile(r"\b(?:a|same|its|random|hash|each|per|every|first|fixed|given)\s+$", re.IGNORECASE)
_RANDOM_AFTER = re.compile(r"^\s*\x00|^\s+(?:\d|of\b|for\b)")
# a line that speaks of random seeds by name
_RANDOM_LINE = re.compile(r"--seed|seed=|manual_seed|random seed", re.IGNORECASE)
# inline code and f-string fields are code, not prose
_CODE = re.compile(r"``[^`\n]*``|`[^`\n]*`|\{[^{}\n]*\}")


def product_files() -> list[Path]:
    """What a user reads: the package, the README, the changelog, the action and docs/."""
    files = [*sorted((ROOT / "perfgate").rglob("*.py")), *sorted((ROOT / "perfgate_pipeline").rglob("*.py"))]
    files += sorted((ROOT / "docs").glob("*.md"))
    return [*files, ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "action.yml"]


def support_files() -> list[Path]:
    """Tests, benchmarks and scripts (not golden files or data, not this file)."""
    here = Path(__file__).resolve()
    files = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p.resolve() != here]
    files += sorted((ROOT / "benchmarks").glob("*.py"))
    files += [p for p in sorted((ROOT / "scripts").rglob("*")) if p.suffix in {".py", ".sh"}]
    return files


def _headings(page: Path) -> set[str]:
    """Section numbers of a page: its ``## N.`` headings."""
    return set(re.findall(r"^##\s+(\d+)\.", page.read_text(encoding="utf-8"), flags=re.MULTILINE))


def _targets(root: Path) -> set[str]:
    design = root / "docs" / "design.md"
    if not design.exists():
        return set()
    return set(re.findall(r"^\|\s*G(\d+)\s*\|", design.read_text(encoding="utf-8"), flags=re.MULTILINE))


def _path_exists(root: Path, ref: str) -> bool:
    if _OUTPUT_PATHS.fullmatch(ref):
        return (root / ref).parent.is_dir()
    if "*" in ref:
        return any(root.glob(ref.rstrip("/")))
    return (root / ref).exists()


def _resolve_md(root: Path, source: Path, name: str) -> Path | None:
    """A Markdown name as a page: from the repository root, or beside a Markdown source."""
    candidates = [root / name]
    if source.suffix == ".md":
        candidates.append(source.parent / name)
    return next((c for c in candidates if c.is_file()), None)


def reference_problems(text: str, source: Path, *, root: Path = ROOT, product: bool = True) -> list[str]:
    """Every reference in ``text`` (the contents of ``source``) that does not resolve, as
    ``"line N: what"``. ``product`` also checks every path, module and bare page name."""
    problems: list[str] = []
    targets = _targets(root)
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern, why in _OUTSIDE:
            if pattern.search(line):
                problems.append(f"line {number}: {pattern.pattern!r}: {why}")
        for match in _SECTION.finditer(line):
            page = _resolve_md(root, source, match.group(1))
            if page is None:
                problems.append(f"line {number}: {match.group(1)} (with a section) is not a page in the repository")
                continue
            missing = set(_SECTION_NUMBER.findall(match.group(2))) - _headings(page)
            for section in sorted(missing):
                problems.append(f"line {number}: {match.group(1)} has no section §{section}")
        for match in _TARGET.finditer(line):
            if match.group(1) not in targets:
                problems.append(f"line {number}: target G{match.group(1)} is not in docs/design.md §11")
        for match in _BARE_MD.finditer(line):
            name = match.group(1)
            if name in _OUTPUT_NAMES or _resolve_md(root, source, name) is not None:
                continue
            # outside the product text, only a page cited like a document is a reference
            if product or name[0].isupper() or "§" in line[match.end() : match.end() + 4]:
                problems.append(f"line {number}: {name} is not a page in the repository (name it by its path)")
        if not product:
            for match in _PATH.finditer(line):
                if match.group(1).startswith("docs/") and not _path_exists(root, match.group(1)):
                    problems.append(f"line {number}: {match.group(1)} does not exist")
            continue
        for match in _PATH.finditer(line):
            if not _path_exists(root, match.group(1)):
                problems.append(f"line {number}: {match.group(1)} does not exist")
        for match in _MODULE.finditer(line):
            module = root.joinpath(*match.group(1).split("."))
            if not (module.with_suffix(".py").is_file() or (module / "__init__.py").is_file()):
                problems.append(f"line {number}: module {match.group(1)} does not exist")
    return problems


def _prose(text: str, suffix: str) -> list[tuple[int, str]]:
    """The prose of a file as (first line, text) blocks: comments and strings of Python
    source (a string without a space is a key or a name, not prose), all of any other file."""
    if suffix != ".py":
        return [(1, text)]
    blocks = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING) and " " in token.string:
            blocks.append((token.start[0], token.string))
    return blocks


def seed_problems(text: str, suffix: str = ".md") -> list[str]:
    """Places that use "seed" for anything but a random seed (the original specification is
    "the original specification"), as ``"line N: ..."``; ``suffix`` says how to read ``text``."""
    problems = []
    for first, block in _prose(text, suffix):
        prose = _CODE.sub(lambda m: "\x00" * len(m.group(0)), block)
        lines = block.splitlines()
        for match in _SEED_WORD.finditer(prose):
            index = block.count("\n", 0, match.start())
            if _RANDOM_LINE.search(lines[index]):
                continue
            quoted = prose[match.start() - 1 : match.start()] + prose[match.end() : match.end() + 1]
            if quoted in ('""', "''"):  # the key "seed" of a run's config
                continue
            if _RANDOM_BEFORE.search(prose[: match.start()]) or _RANDOM_AFTER.search(prose[match.end() :]):
                continue
            problems.append(f"line {first + index}: {lines[index].strip()!r}: say 'the original specification'")
    return problems


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", product_files(), ids=_rel)
def test_product_references_resolve(path: Path) -> None:
    assert reference_problems(path.read_text(encoding="utf-8"), path) == []


@pytest.mark.parametrize("path", support_files(), ids=_rel)
def test_support_references_resolve(path: Path) -> None:
    assert reference_problems(path.read_text(encoding="utf-8"), path, product=False) == []


@pytest.mark.parametrize("path", product_files() + support_files(), ids=_rel)
def test_seed_means_a_random_seed(path: Path) -> None:
    assert seed_problems(path.read_text(encoding="utf-8"), path.suffix) == []


def test_the_readme_points_at_the_documents() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("docs/design.md", "docs/noise.md", "docs/limits.md"):
        assert page in readme


# The same functions on planted text: each kind of broken reference is found.


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('"""The layers of DESIGN §2."""', "docs/design.md"),
        ("# see shared/research/noise.md", "outside the repository"),
        ("# as research note G10 found", "research note"),
        ("# measured in docs/noise.md §9", "no section §9"),
        ("# the contracts (``docs/design.md`` §4, §99)", "no section §99"),
        ("# the contracts (docs/missing.md §1)", "not a page"),
        ("# agrees to 1e-5 (tests/pipeline/test_models_serve.py)", "does not exist"),
        ("# python benchmarks/nothing_here.py", "does not exist"),
        ("# golden files in tests/golden/*.nothing", "does not exist"),
        ("# the spread is noise.md's finding (noise.md §2)", "name it by its path"),
        ("# (:mod:`perfgate.core.nothing`)", "module perfgate.core.nothing"),
        ("# a goal of the project (G99)", "target G99"),
    ],
)
def test_a_broken_reference_is_found(tmp_path: Path, text: str, says: str) -> None:
    source = tmp_path / "planted.py"
    source.write_text(text + "\n", encoding="utf-8")
    problems = reference_problems(source.read_text(encoding="utf-8"), source)
    assert len(problems) >= 1
    assert any(says in p for p in problems), problems


@pytest.mark.parametrize(
    "text",
    [
        "# the noise model (docs/noise.md §4; docs/design.md §9, §10)",
        "# golden files are tests/golden/*.prom; the check is perfgate/core/compare.py",
        "# written to .perfgate/noise.json (:mod:`perfgate.core.noise`), target G9",
        "perfgate check --baseline b.json --current c.json --output report.md",
    ],
)
def test_a_good_reference_passes(tmp_path: Path, text: str) -> None:
    source = tmp_path / "planted.py"
    assert reference_problems(text, source) == []


@pytest.mark.parametrize(
    "text",
    [
        "# the seed's example regresses",
        "# the panels the seed asks for",
        "# in the seed format, one number per metric",
        "# as the original seed said",
    ],
)
def test_seed_for_the_specification_is_found(text: str) -> None:
    assert len(seed_problems(text)) == 1


@pytest.mark.parametrize(
    "text",
    [
        "parser.add_argument('--seed', type=int)",
        "torch.manual_seed(0)  # the seed of every run is recorded",
        "# deterministic for a seed (same seed, same bytes)",
        "rng = np.random.default_rng(seed=3)",
        "# the random seed, the pairs, the ratios",
        "# the seed of the generator is the pair's index",
    ],
)
def test_random_seeds_pass(text: str) -> None:
    assert seed_problems(text) == []


def test_python_prose_is_read_from_comments_and_strings(tmp_path: Path) -> None:
    source = tmp_path / "planted.py"
    source.write_text(
        "def test_seed_example(seed_files):\n"
        '    """Seed "Example Report": the load regresses.\n\n'
        "    Drawn from a random.Random; the same\n"
        '    seed always gives the same case."""\n'
        "    rng = make(seed)  # the check as the seed runs it\n"
        '    return {"seed": seed, "label": f"(seed {seed})"}\n',
        encoding="utf-8",
    )
    problems = seed_problems(source.read_text(encoding="utf-8"), source.suffix)
    assert [p.split(":")[0] for p in problems] == ["line 2", "line 6"], problems
