"""A change shared by many single-process benchmarks, on a real library: cattrs.

64 pytest-benchmark benchmarks of cattrs (8 attrs class shapes x unstructure/structure x
``cattrs.Converter``/``cattrs.BaseConverter`` x one object/a list of 50), each ``pytest``
process one run. The change is a few lines added to ``cattrs.Converter.unstructure`` (a lookup of
the class's fields and its name on every call), which makes the 16 benchmarks that go through
that method slower, by about 10 % (a list of 50) to 2x (one object), and leaves the 48 others
alone. ``BaseConverter.unstructure`` is not touched.

Recorded interleaved (``--aa`` unchanged runs, ``--ab`` changed ones, one changed after every few
unchanged), then checked as a new user would, with perfgate's own rule:

* from files, without history: every changed run against every unchanged run before it, and
  every unchanged run against the one before it (A/A);
* with a store's history: the baseline pooled from the ``--history`` unchanged runs before
  the checked one.

Printed: exit codes, how many of the benchmarks the change made more than 10 % slower were
named, benchmarks outside the 16 named, and what an unchanged run's check said. Needs
``pip install cattrs`` beside perfgate's dev tools (pytest-benchmark)::

    python benchmarks/cattrs_case.py --aa 10 --ab 4 --out /tmp/cattrs_case
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TESTS = textwrap.dedent(
    """\
    from __future__ import annotations

    import attrs
    import cattrs
    import pytest


    @attrs.define
    class Point:
        x: int
        y: int


    @attrs.define
    class Person:
        name: str
        age: int
        email: str


    @attrs.define
    class Nested:
        p: Point
        q: Person


    @attrs.define
    class WithList:
        items: list[int]


    @attrs.define
    class WithDict:
        mapping: dict[str, int]


    @attrs.define
    class WithOptional:
        a: int | None
        b: str | None


    @attrs.define
    class Tree:
        value: int
        children: list[Point]


    Wide = attrs.make_class("Wide", {f"f{i}": attrs.field(type=int) for i in range(16)})

    SHAPES = {
        "point": (Point, lambda i: Point(i, i + 1)),
        "person": (Person, lambda i: Person(f"name{i}", i, f"n{i}@example.com")),
        "nested": (Nested, lambda i: Nested(Point(i, i), Person(f"n{i}", i, "e"))),
        "list": (WithList, lambda i: WithList(list(range(i % 7, i % 7 + 12)))),
        "dict": (WithDict, lambda i: WithDict({f"k{j}": j + i for j in range(8)})),
        "optional": (WithOptional, lambda i: WithOptional(i if i % 2 else None, None if i % 2 else "s")),
        "tree": (Tree, lambda i: Tree(i, [Point(j, j) for j in range(5)])),
        "wide": (Wide, lambda i: Wide(*range(i, i + 16))),
    }
    CONVERTERS = {"converter": cattrs.Converter, "base": cattrs.BaseConverter}


    CASES = pytest.mark.parametrize(
        ("shape", "kind", "size"), [(s, k, n) for s in SHAPES for k in CONVERTERS for n in ("one", "many")]
    )


    def case(shape, kind, size):
        # a converter, one object or a list of 50 of the shape, and the type to convert it as
        cls, make = SHAPES[shape]
        if size == "one":
            return CONVERTERS[kind](), make(3), cls
        return CONVERTERS[kind](), [make(i) for i in range(50)], list[cls]


    @CASES
    def test_unstructure(benchmark, shape, kind, size):
        conv, value, as_type = case(shape, kind, size)
        benchmark(conv.unstructure, value, as_type)


    @CASES
    def test_structure(benchmark, shape, kind, size):
        conv, value, as_type = case(shape, kind, size)
        benchmark(conv.structure, conv.unstructure(value, as_type), as_type)
    """
)

# the change: a few lines added to Converter.unstructure, as a contributor might add them
CONFTEST = textwrap.dedent(
    """\
    import os

    import cattrs

    if os.environ.get("CATTRS_CASE_CHANGED") == "1":
        _original = cattrs.Converter.unstructure

        def unstructure(self, obj, unstructure_as=None):
            cls = obj.__class__ if unstructure_as is None else unstructure_as
            fields = getattr(cls, "__attrs_attrs__", ())
            names = [f.name for f in fields]
            _ = f"{getattr(cls, '__qualname__', cls)!r}:{len(names)}"
            return _original(self, obj, unstructure_as)

        cattrs.Converter.unstructure = unstructure
    """
)


def _record(out: Path, aa: int, ab: int) -> list[dict[str, object]]:
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "test_cattrs_bench.py").write_text(TESTS)
    (work / "conftest.py").write_text(CONFTEST)
    # one changed run after every few unchanged ones, the first two unchanged
    every = max(2, (aa + ab) // max(ab, 1))
    kinds: list[str] = []
    a_left, b_left = aa, ab
    while a_left or b_left:
        if (b_left and len(kinds) >= 2 and (len(kinds) + 1) % every == 0) or not a_left:
            kinds.append("B")
            b_left -= 1
        else:
            kinds.append("A")
            a_left -= 1
    manifest = []
    for index, kind in enumerate(kinds):
        path = out / f"run_{index:03d}_{kind}.json"
        env = dict(os.environ, CATTRS_CASE_CHANGED="1" if kind == "B" else "0")
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_cattrs_bench.py",
             f"--benchmark-json={path}", "--benchmark-min-rounds=50", "--benchmark-max-time=0.5"],
            check=True, capture_output=True, text=True, cwd=work, env=env,
        )  # fmt: skip
        seconds = time.perf_counter() - t0
        manifest.append({"index": index, "kind": kind, "file": path.name, "seconds": round(seconds, 1)})
        print(f"  {index + 1}/{len(kinds)} {kind} ({seconds:.0f} s)", flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _evaluate(out: Path, manifest: list[dict[str, object]], history: int) -> None:
    sys.path.insert(0, str(ROOT))
    from perfgate.core.baseline import pool_runs
    from perfgate.core.compare import compare_runs
    from perfgate.core.policy import Policy
    from perfgate.core.result import Verdict
    from perfgate.importers import ImportOptions, import_file

    runs = {
        int(e["index"]): import_file("pytest-benchmark", out / str(e["file"]), ImportOptions(model="cattrs")).run
        for e in manifest
    }
    kinds = {int(e["index"]): str(e["kind"]) for e in manifest}
    import numpy as np

    sample = runs[min(runs)]
    # the 16 benchmarks through Converter.unstructure; those of them the change made slower than the
    # threshold (10 %) over all runs, pooled, are the ones a check should name
    through = {m for m in sample.metrics if m.startswith("test_unstructure_") and "_converter_" in m}

    def pooled_median(name: str, kind: str) -> float:
        return float(np.median([np.median(r.metrics[name].samples) for i, r in runs.items() if kinds[i] == kind]))

    ratio = {m: pooled_median(m, "B") / pooled_median(m, "A") for m in through}
    slowed = {m for m in through if ratio[m] > 1.10}
    print(
        f"{len(sample.metrics)} benchmarks; {len(through)} through Converter.unstructure, {len(slowed)} of them "
        f"more than 10 % slower with the change (pooled medians: "
        f"{', '.join(f'{ratio[m] - 1:+.0%}' for m in sorted(through, key=ratio.__getitem__))})"
    )

    def check(base, cur) -> tuple[int, set[str], set[str], str]:
        result = compare_runs(base, cur, Policy())
        reg = {c.metric for c in result.regressions}
        imp = {c.metric for c in result.comparisons if c.verdict is Verdict.IMPROVED}
        said = " | ".join(result.shared_phase.notes) if result.shared_phase else ""
        return result.exit_code, reg, imp, said

    unchanged = [i for i in sorted(runs) if kinds[i] == "A"]
    changed = [i for i in sorted(runs) if kinds[i] == "B"]
    rows: list[tuple[str, str, int, set[str], set[str], str]] = []
    for i in changed:
        for a in [a for a in unchanged if a < i]:
            rows.append(("files", f"{a}->{i}", *check(runs[a], runs[i])))
    for prev, i in itertools.pairwise(unchanged):
        rows.append(("files A/A", f"{prev}->{i}", *check(runs[prev], runs[i])))
    for i in sorted(runs):
        before = [a for a in unchanged if a < i][-history:]
        if len(before) < history:
            continue
        pooled = pool_runs([runs[a] for a in before][::-1])
        label = "store" if kinds[i] == "B" else "store A/A"
        rows.append((label, f"{before[0]}..{before[-1]}->{i}", *check(pooled, runs[i])))
    print(f"{'how':10} {'checks':>7} {'exit 0/1/2':>11} {'slowed named':>22} {'untouched named':>16} "
          f"{'improved':>9}")  # fmt: skip
    for how in ("files", "files A/A", "store", "store A/A"):
        mine = [r for r in rows if r[0] == how]
        if not mine:
            continue
        codes = [sum(1 for r in mine if r[2] == c) for c in (0, 1, 2)]
        named = sorted(len(r[3] & slowed) for r in mine)
        untouched = sum(len(r[3] - through) for r in mine)
        improved = sum(len(r[4]) for r in mine)
        span = f"{named[0]}-{named[-1]} of {len(slowed)}" if how in ("files", "store") else "—"
        print(f"{how:10} {len(mine):>7} {'/'.join(map(str, codes)):>11} {span:>22} {untouched:>16} {improved:>9}")
    said = {r[5] for r in rows if r[0] == "files A/A" and r[5]}
    for s in sorted(said):
        print(f"  an unchanged run's check from files said: {s[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the recorded runs")
    parser.add_argument("--aa", type=int, default=10, help="unchanged runs")
    parser.add_argument("--ab", type=int, default=4, help="runs with the change")
    parser.add_argument("--history", type=int, default=4, help="unchanged runs pooled for the store's checks")
    parser.add_argument("--evaluate-only", action="store_true", help="check the runs already in --out")
    args = parser.parse_args()
    out = Path(args.out)
    if args.evaluate_only:
        manifest = json.loads((out / "manifest.json").read_text())
    else:
        manifest = _record(out, args.aa, args.ab)
    _evaluate(out, manifest, args.history)


if __name__ == "__main__":
    main()
