"""The fuzzers with fresh seeds (issue 26): every surface on this tree, and the differential surfaces on copies
of it with each wrong-code fix of issue 25 reverted, to show the fuzzers find those bugs.

    python benchmarks/fuzz_campaign.py --part main --seconds 150      # every surface of scripts/fuzz.py
    python benchmarks/fuzz_campaign.py --part reverts --seconds 180   # issue 25's items 1-5, one copy each
    python benchmarks/fuzz_campaign.py --part main --seconds 600 --out fuzz_library36 --surfaces \\
        library-tree,library-linear,library-nb,library-svm,library-mlp,library-onnx,xgboost-file,lightgbm-file,onnx-file
    python benchmarks/fuzz_campaign.py --part reverts --issue 36 --seconds 300   # issue 36's items, one copy each
    python benchmarks/fuzz_campaign.py --part reverts --issue 49 --seconds 900   # the four .tflite kinds of issue 49
    python benchmarks/fuzz_campaign.py --print                        # the tables of the saved results

``--part reverts`` exports HEAD (``git archive``) into a temporary folder per item, reverts that item's fix
there (``git show <commit> -- <files> | patch -R``: the working tree is never touched), and runs the surface
that should find it with a fresh seed for up to ``--seconds``, ending at the first finding that matches the
item (the seconds column is then the time to find it); a finding counts when a crash's description
matches the item's signature (e.g. UBSan's "shift exponent" for the input helper). Results are saved as
JSON in benchmarks/results/ and printed as tables by ``--print``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

# issue 25 item -> (what, fix commit, files of the fix to revert, surface that must find it, signature)
REVERTS = {
    1: ("float32 overflow of squared distances (features ~1e19): C predicts class 0",
        "e77f45d", ["tinycc_ml/api.py"], "oracle", r"float: row \d+: the C predicts"),
    # the input helper was rewritten since (exact power-of-two factor tables: no shift left to revert), so
    # its fix is undone by deleting the NaN check it added
    2: ("input helper: (int32_t)NaN (fix e77f45d's NaN check, deleted by hand)",
        ("tinycc_ml/codegen/float_input.py", '            "    if (y != y) return 0; /* NaN: no value to round */",\n',
         ""), ["tinycc_ml/codegen/float_input.py"], "oracle",
        r"shift exponent|nan is outside the range|input helper gives"),
    3: ("--examples rows with NaN/Inf/1e300 written as nanf/inff: firmware does not build",
        "bde1251", ["tinycc_ml"], "names", r"nanf|inff|does not build.*examples"),
    4: ("multilabel threshold outside the score type: always-false compare, 1e+300f",
        "dbbbd5b", ["tinycc_ml"], "oracle", r"does not build.*(always|range|overflow|float)"),
    # verify.py changed since; fix 900d2de is undone by deleting its call to the range checks
    5: ("IR ops' integer attributes unchecked by verify() (drop_bits -40...): the interpreters raise",
        ("tinycc_ml/ir/verify.py", '        _check_int_attrs(where, op.name, data["attrs"])\n', ""),
        ["tinycc_ml/ir/verify.py"], "ir", r"negative shift|shift count|OverflowError|IndexError"),
}
# issue 36 item -> (what, fix commit or textual undo(s), files, surface that must find it, signature); a
# textual undo is (file, text, replacement) or a list of them, applied to HEAD where the fix was rewritten since
REVERTS_36 = {
    "1": ("link functions dropped: HistGradientBoosting poisson/gamma compiled as the raw sum of the trees",
          ("tinycc_ml/importers/sklearn.py", '"gamma": ("exp", 1.0), "poisson": ("exp", 1.0)',
           '"gamma": ("identity", 1.0), "poisson": ("identity", 1.0)'),
          ["tinycc_ml/importers/sklearn.py"], "library-tree",
          r"HistGradientBoostingRegressor\((poisson|gamma)\): wrong"),
    "2": ("tree tables: feature indices past 32,767 / 65,535 in uint16 (the default-left bit, overflow)",
          ("tinycc_ml/codegen/trees.py", "        if top < 2 ** (bits - 1 if marked else bits):",
           "        if top < 2 ** (bits - 1 if marked else bits) or bits == 16:"),
          ["tinycc_ml/codegen/trees.py"], "library-tree", r"C does not build|wrong on"),
    "3": ("XGBoost early stopping: every tree compiled, predict stops at best_iteration",
          ("tinycc_ml/importers/xgboost.py",
           "    used = _trees_predict_uses(model, learner, trees, source) if best_iteration else len(trees)",
           "    used = len(trees)"),
          ["tinycc_ml/importers/xgboost.py"], "library-tree", r"XGB\w+\([^)]*early-stopped\): wrong on"),
    "3b": ("XGBoost binary:logitraw: the C thresholds the margin at 0, predict at 0.5",
           ("tinycc_ml/importers/xgboost.py", "        base = base - LOGITRAW_THRESHOLD\n", "        base = base\n"),
           ["tinycc_ml/importers/xgboost.py"], "library-tree", r"XGBClassifier\(binary:logitraw\): wrong"),
    "4": ("LightGBM reads |x| <= 1e-35 as 0 before comparing (kZeroThreshold); the C did not",
          ("tinycc_ml/importers/lightgbm.py",
           'threshold = zero_threshold(_floats(tree, "threshold", where, m, plus_inf=True))',
           'threshold = _floats(tree, "threshold", where, m, plus_inf=True)'),
          ["tinycc_ml/importers/lightgbm.py"], "library-tree", r"LGBM.*wrong on"),
    "5": ("GaussianNB float builds clipped distances at 32 x features: 3-sigma rows got another class",
          "cf609c5", ["tinycc_ml/models/naive_bayes.py", "tinycc_ml/models/base.py", "tinycc_ml/api.py"],
          "library-nb", r"GaussianNB.*wrong on"),
    "6": ("float32 overflow refused for distances only: MLP weights x 1e20 gave inf, NaN, wrong labels",
          ("tinycc_ml/api.py",
           "        check_float_range(graph, *float_input_range(model, calibration, options), model.describe())\n",
           ""),
          ["tinycc_ml/api.py"], "library-mlp", r"wrong on"),
    "7": ("integer tree builds clipped each feature's shift to [-16, 24] (a 1e12 feature cost every feature 11 bits)",
          "81ab1d4", ["tinycc_ml/passes/input_scales.py"], "library-tree",
          r"int16 agrees with the library on only"),
    "10a": ("hand-edited XGBoost JSON: a tree that is not an object gave a traceback",
            ("tinycc_ml/importers/xgboost.py", "        if not isinstance(tree, dict):\n",
             "        if tree is None:\n"),
            ["tinycc_ml/importers/xgboost.py"], "xgboost-file", r"loading: (AttributeError|TypeError)"),
    "10b": ("ONNX initializers whose dims disagree with their data gave a traceback",
            [("tinycc_ml/importers/onnx_data.py", "len(tensor.raw_data) != count * dtype.itemsize:",
              "len(tensor.raw_data) != count * dtype.itemsize and False:"),
             ("tinycc_ml/importers/onnx_data.py", "        except Exception as exc:\n            raise ModelFileError("
              "f\"{path}: initializer {tensor.name!r} (dims {list(tensor.dims)}) cannot be read: \"",
              "        except ZeroDivisionError as exc:\n            raise ModelFileError("
              "f\"{path}: initializer {tensor.name!r} (dims {list(tensor.dims)}) cannot be read: \"")],
            ["tinycc_ml/importers/onnx_data.py"], "onnx-file", r"loading: ValueError"),
}
# issue 49 item 1: the four kinds of .tflite file tflite-micro accepts with other outputs than the reader's, each
# check undone by hand at HEAD (the reader was rewritten since its fix a038f19); the tflite surface's oracle
# (tflite-micro on every accepted integer file) must find each
TFLITE_DIFFERS = (r"differs from tflite-micro|the host C differs|the interpreter fails on an accepted|"
                  r"tflite-micro crashes")
REVERTS_49 = {
    "reshape": ("RESHAPE re-quantised: the output's scale and zero point ignored (the input's kept)",
                ("tinycc_ml/ir/ops/shape.py", "declared is None or declared.dtype == x.dtype,",
                 "declared is None or declared.dtype == x.dtype or True,"),
                ["tinycc_ml/ir/ops/shape.py"], "tflite", TFLITE_DIFFERS),
    "stride0": ("stride / dilation absent or 0 read as 1 (the schema's default is 0: tflite-micro runs stride 0)",
                ("tinycc_ml/importers/tflite.py", '    value = int(options.scalar(index, "i", default, name))\n',
                 '    value = max(1, int(options.scalar(index, "i", default, name)))\n'),
                ["tinycc_ml/importers/tflite.py"], "tflite", TFLITE_DIFFERS),
    "declared_shape": ("an operator's declared output shape not checked against the one it computes",
                       ("tinycc_ml/importers/tflite.py", "        if computed != out.shape:\n",
                        "        if computed != out.shape and False:\n"),
                       ["tinycc_ml/importers/tflite.py"], "tflite", TFLITE_DIFFERS),
    "bias": ("int32 biases near +-2^31: accumulators that can pass int32 accepted (TFLite wraps)",
             ("tinycc_ml/importers/tflite.py", "        if worst[0] < lowest or worst[1] > highest:\n",
              "        if False:\n"),
             ["tinycc_ml/importers/tflite.py"], "tflite", TFLITE_DIFFERS),
}
REVERT_TABLES = {25: None, 36: REVERTS_36, 49: REVERTS_49}
SURFACES = ["oracle", "oracle-avr", "oracle-m0", "model", "ir", "cli", "names", "fit", "edgeml", "concurrent",
            "interrupt"]
LIBRARY_SURFACES = ["library-tree", "library-linear", "library-nb", "library-svm", "library-mlp", "library-onnx",
                    "xgboost-file", "lightgbm-file", "onnx-file"]


def fuzz(tree: Path, surfaces: list[str], seconds: float, json_path: Path, jobs: int,
         stop_on: str | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(tree / "scripts" / "fuzz.py"), "--explore", str(seconds), "--target",
           ",".join(surfaces), "--json", str(json_path), "--jobs", str(jobs),
           "--reproducers", str(json_path.with_suffix("")) + "-reproducers"]
    if stop_on is not None:
        cmd += ["--stop-on", stop_on]
    subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, check=False)
    return json.loads(json_path.read_text())


def export_with_revert(commit: str | None, files: list[str], dest: Path, base: str = "HEAD") -> None:
    archive = subprocess.run(["git", "archive", base], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    if commit is None:
        return
    if isinstance(commit, (tuple, list)):  # (file, text, replacement)s: a fix whose code moved, undone by hand
        for name, text, replacement in [commit] if isinstance(commit, tuple) else commit:
            source = (dest / name).read_text()
            if text not in source:
                raise SystemExit(f"{name}: the fix's text to undo is not there any more: {text!r}")
            (dest / name).write_text(source.replace(text, replacement))
        return
    patch = subprocess.run(["git", "show", commit, "--", *files], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["patch", "-R", "-p1", "--no-backup-if-mismatch", "-s"], cwd=dest, input=patch, check=True)


def part_main(seconds: float, jobs: int, surfaces: list[str], out: str = "fuzz_main") -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-head-") as tmp:  # HEAD as committed, not the work tree
        export_with_revert(None, [], Path(tmp), commit)
        data = fuzz(Path(tmp), surfaces, seconds, RESULTS / f"{out}.json", jobs)
    data["commit"] = commit
    (RESULTS / f"{out}.json").write_text(json.dumps(data, indent=1) + "\n")


def part_reverts(seconds: float, jobs: int, items: list[str], base: str = "HEAD", issue: int = 25) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {}
    table = REVERT_TABLES[issue] or {str(k): v for k, v in REVERTS.items()}
    path = RESULTS / (f"fuzz_reverts{issue}.json" if issue != 25 else "fuzz_reverts.json")
    if path.exists():
        out = json.loads(path.read_text())
    for item in items:
        what, commit, files, surface, signature = table[item]
        with tempfile.TemporaryDirectory(prefix=f"tinycc-ml-revert{item}-") as tmp:
            export_with_revert(commit, files, Path(tmp), base)
            t0 = time.time()
            data = fuzz(Path(tmp), [surface], seconds, Path(tmp) / "result.json", jobs, stop_on=signature)
            data["wall_seconds"] = time.time() - t0
        hits = [c for c in data["crashes"] if re.search(signature, c["detail"], re.S)]
        row = data["surfaces"][0]
        out[str(item)] = {"what": what, "commit": commit if isinstance(commit, str) else "by hand", "files": files,
                          "surface": surface, "seed": data["seed"],
                          "base": subprocess.run(["git", "rev-parse", "--short", base], cwd=ROOT, capture_output=True,
                                                 text=True).stdout.strip(),
                          "cases": row["cases"], "seconds": row["seconds"], "crashes": row["crashes"],
                          "matching": len(hits), "first_case": min((c["case"] for c in hits), default=None),
                          "example": (hits or data["crashes"] or [{"detail": ""}])[0]["detail"][:300],
                          "others": sorted({" ".join(c["detail"].split())[:160] for c in data["crashes"]
                                            if c not in hits})[:6]}
        path.write_text(json.dumps(out, indent=1) + "\n")


def print_run(path: Path, title: str) -> None:
    data = json.loads(path.read_text())
    print(f"{title}: fresh seed {data['seed']} on commit {data.get('commit', '?')}, {data['explore_seconds']:g} s per "
          f"surface, {data['jobs']} worker(s):\n")
    print(f"{'surface':<11} {'cases':>6} {'ok':>6} {'clean errors':>13} {'crashes':>8} {'seconds':>8}")
    for r in data["surfaces"]:
        print(f"{r['surface']:<11} {r['cases']:>6} {r['successes']:>6} {r['clean_errors']:>13} {r['crashes']:>8} "
              f"{r['seconds']:>8.0f}")
    total = sum(r["cases"] for r in data["surfaces"])
    print(f"{'total':<11} {total:>6} {'':>6} {'':>13} {sum(r['crashes'] for r in data['surfaces']):>8}")
    for c in data["crashes"]:
        print(f"  finding: {c['surface']} case {c['case']}: {' '.join(c['detail'].split())[:160]}")
    print()


def print_hundred_thousand(path: Path) -> None:
    """The `scripts/fuzz.py --cases 100000 --jobs 2` runs (issue 22), one table per run."""
    for data in json.loads(path.read_text()):
        print(f"seed {data['seed']} on commit {data['commit']} ({data['note']}), {data['jobs']} workers:\n")
        print(f"{'surface':<8} {'cases':>7} {'ok':>6} {'clean errors':>13} {'crashes':>8} {'seconds':>8} "
              f"{'cases/s':>8} {'slowest':>8}")
        for r in data["surfaces"]:
            print(f"{r['surface']:<8} {r['cases']:>7} {r['successes']:>6} {r['clean_errors']:>13} {r['crashes']:>8} "
                  f"{r['seconds']:>8.0f} {r['cases'] / r['seconds']:>8.1f} {r['slowest']:>8.2f}")
        kinds = Counter(" ".join(c["detail"].split())[:70] for c in data["crashes"])
        for kind, n in kinds.most_common():
            print(f"  {n} x {kind}")
        print()


def library_campaign_table(paths: list[Path], table: str = "fuzz_library36_table",
                           title: str = "Issue 36's surfaces, one worker each, fresh seeds") -> None:
    """Issue 36's campaign (the source-library and library-file surfaces; a case is one model or file, compared
    with its library on its rows), printed and written for the docs as benchmarks/results/<table>."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from results_table import write_table

    rows, findings = [], []
    for path in paths:
        data = json.loads(path.read_text())
        for k, r in enumerate(data["surfaces"]):
            run = f"seed {data['seed']}, {data.get('commit', '?')}" if k == 0 else ""
            rows.append([run, r["surface"], f"{r['cases']:,}", f"{r.get('rows', 0):,}", f"{r['successes']:,}",
                         f"{r['clean_errors']:,}", f"{r['crashes']:,}", f"{r['seconds']:.0f}"])
        findings += data["crashes"]
    rows.append(["total", "", f"{sum(int(r[2].replace(',', '')) for r in rows):,}",
                 f"{sum(int(r[3].replace(',', '')) for r in rows):,}", "", "",
                 f"{sum(int(r[6].replace(',', '')) for r in rows):,}", ""])
    print(f"{title}:\n")
    write_table(table, ["run", "surface", "models / files", "rows compared", "ok", "clean errors",
                                         "crashes", "seconds"], rows, script="benchmarks/fuzz_campaign.py --print",
                align=[None, None, "right", "right", "right", "right", "right", "right"])
    for c in findings:
        print(f"  finding: {c['surface']} case {c['case']}: {' '.join(c['detail'].split())[:160]}")
    print()


def reverts36_table(path: Path, issue: int = 36) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from results_table import write_table

    data = json.loads(path.read_text())
    print(f"Issue {issue}'s fixes reverted one at a time (fresh seed each, the surface stopped at the first matching "
          "finding):\n")
    order = sorted(data.items(), key=lambda kv: (int(kv[0].rstrip("ab")), kv[0])) if issue == 36 else \
        [(item, data[item]) for item in REVERTS_49 if item in data]
    rows = [[item, r["surface"], f"{r['cases']:,}", f"{r['seconds']:.0f}", "yes" if r["matching"] else "no",
             "-" if r["first_case"] is None else str(r["first_case"]), r["what"]] for item, r in order]
    write_table(f"fuzz_reverts{issue}_table", ["item", "surface", "cases", "seconds", "found", "first at case",
                                                "bug undone"],
                rows, script="benchmarks/fuzz_campaign.py --print",
                align=[None, None, "right", "right", None, "right", None])
    for item, r in order:
        print(f"  item {item} e.g.: {' '.join(r['example'].split())[:220]}")


def print_tables() -> None:
    # run 1 (saved by hand as fuzz_main_run1.json) found bugs on main that were then fixed; fuzz_main.json is
    # the latest --part main run
    for name, title in (("fuzz_main_run1.json", "Run 1, every surface"), ("fuzz_main.json", "Latest run"),
                        ("fuzz_interrupt_latest.json", "Ctrl-C surface after the exit fix")):
        if (RESULTS / name).exists():
            print_run(RESULTS / name, title)
    if (RESULTS / "fuzz_100k.json").exists():
        print("10^5 cases per surface (scripts/fuzz.py --cases 100000 --jobs 2):\n")
        print_hundred_thousand(RESULTS / "fuzz_100k.json")
    campaign36 = [RESULTS / f"{name}.json" for name in ("fuzz_library36", "fuzz_library36b", "fuzz_library36_svm2",
                                                        "fuzz_files36")]
    if any(path.exists() for path in campaign36):
        library_campaign_table([path for path in campaign36 if path.exists()])
    # the run at the head of stop 41 (be20f26), then the surfaces with findings again at their fixes' head
    clean36 = [RESULTS / f"{name}.json" for name in ("fuzz_clean_head", "fuzz_clean_rerun_a", "fuzz_clean_rerun_b",
                                                      "fuzz_clean_rerun_c", "fuzz_clean_rerun_d")]
    if any(path.exists() for path in clean36):
        library_campaign_table([path for path in clean36 if path.exists()], "fuzz_clean36_table",
                               "Issue 36's surfaces again after the fixes, fresh seeds")
    for issue in (36, 49):
        if (RESULTS / f"fuzz_reverts{issue}.json").exists():
            reverts36_table(RESULTS / f"fuzz_reverts{issue}.json", issue)
    reverts = RESULTS / "fuzz_reverts.json"
    if reverts.exists():
        data = json.loads(reverts.read_text())
        print("\nIssue 25's wrong-code fixes reverted one at a time (fresh seed each):\n")
        print(f"{'item':<5} {'surface':<8} {'cases':>6} {'seconds':>8} {'findings':>9} {'first at case':>14}  bug")
        for item, r in sorted(data.items(), key=lambda kv: int(kv[0])):
            first = "-" if r["first_case"] is None else str(r["first_case"])
            print(f"{item:<5} {r['surface']:<8} {r['cases']:>6} {r['seconds']:>8.0f} {r['matching']:>9} {first:>14}  "
                  f"{r['what']}")
        for item, r in sorted(data.items(), key=lambda kv: int(kv[0])):
            print(f"  item {item} e.g.: {' '.join(r['example'].split())[:220]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("main", "reverts"), default=None)
    parser.add_argument("--seconds", type=float, default=600.0, help="seconds per surface (default 600)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--items", default=None, help="items to revert (default all of --issue's)")
    parser.add_argument("--issue", type=int, choices=sorted(REVERT_TABLES), default=25,
                        help="whose fixes --part reverts undoes: issue 25's (default), 36's or 49's (.tflite kinds)")
    parser.add_argument("--out", default="fuzz_main", help="result file of --part main (benchmarks/results/OUT.json)")
    parser.add_argument("--base", default="HEAD", help="revision the reverts are applied to (default HEAD)")
    parser.add_argument("--surfaces", default=",".join(SURFACES), help="surfaces of --part main (default all)")
    parser.add_argument("--print", action="store_true", help="print the tables of the saved results")
    args = parser.parse_args(argv)
    if args.part == "main":
        part_main(args.seconds, args.jobs, args.surfaces.split(","), args.out)
    elif args.part == "reverts":
        table = REVERT_TABLES[args.issue] or REVERTS
        items = args.items.split(",") if args.items else [str(k) for k in table]
        part_reverts(args.seconds, args.jobs, items, args.base, args.issue)
    if args.print or args.part is None:
        print_tables()
    return 0


if __name__ == "__main__":
    sys.exit(main())
