#!/usr/bin/env bash
# The one-command check on a GPU machine (issue 16): install offline, run tests/gpu, measure
# the harness's overhead, run the seeds' cases, write a measured baseline, bundle it all.
#
#   bash benchmarks/gpu_check.sh OUT_DIR [--part 1|2|3] [--dry-run]
#
#   --part 1   install; machine facts (nvidia-smi, environment); pytest tests/gpu;
#              benchmarks/overhead.py for resnet50 amp bs256 (the harness / bare-loop ratio)
#   --part 2   install; machine facts; the seeds' cases on one GPU with --dlperf-runs 3:
#              the summary, JSON results, Markdown report, plots and a measured baseline
#   --part 3   install; the verdicts on the GPU (issue 12): benchmarks/verdict_quality.py
#              with resnet50 amp bs256, 10 unchanged sessions and 10 slowed by 5% against a
#              baseline it saves, at a 3% tolerance (DLPERF_CHECK_VQ_TOLERANCES): the
#              false-alarm and detection rates, runs per verdict
#   (no --part: all three, one after the other, for a machine without a per-command limit)
#   --dry-run  on any machine, in under a minute: print every command a real run would
#              run, and run the CPU-safe ones instead with tiny settings (tests/gpu skip
#              without CUDA; the overhead and seed steps train `tiny` on the CPU); the same
#              bundle layout comes out
#
# Each part is meant for one command of at most 10 minutes: it gives itself a budget of
# DLPERF_CHECK_BUDGET seconds (default 540) and every step a time limit within what is left
# (`timeout -s INT`: pytest still writes its JUnit XML and the plugin its JSON and report).
# A step cut off by its limit, or one that fails, is reported; the next step still runs.
#
# OUT_DIR receives at most 8 files (8 after all three parts), and nothing else:
#   part1-summary.txt     what ran, how long, test counts, the harness / bare-loop ratio
#   part1-logs.tar.gz     install log, nvidia-smi -L/-q/topo, environment.json, pip freeze,
#                         tests/gpu output + JUnit XML + the inner sessions' worker logs,
#                         overhead.py output
#   overhead.json         benchmarks/overhead.py --json
#   part2-summary.txt     what ran, the dlperf summary table, where the baseline went
#   results.json          --dlperf-json of the seed cases (docs/result-format.md)
#   <gpu>.json            the measured baseline (h100.json, h200.json, ...; cpu-dry-run.json
#                         in a dry run): copy it to baselines/ and commit it
#   part2-report.tar.gz   report.md + report-logs/, plots/*.png, benchmark.json, the
#                         seeds' pytest output and JUnit XML
#   part3-verdicts.txt    what ran, verdict_quality's table and every session's message
#
# Offline install.  The GPU machine has torch, torchvision, pytest, pytest-benchmark,
# nvidia-ml-py, psutil, matplotlib and transformers, but not jsonschema and its
# dependencies, and no network.  Bring their wheels in .whl/ (git-ignored; with the device
# tool, carry ".whl").  They were downloaded, on a machine with a network, with the
# versions CI pins (.ci/constraints.txt: jsonschema 4.26.0) and pip's resolution of the
# rest, for CPython 3.11 to 3.13 (rpds-py is compiled; the others are pure Python):
#
#   for v in 3.11 3.12 3.13; do
#     python3 -m pip download --no-deps --only-binary=:all: --python-version $v \
#       --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .whl jsonschema==4.26.0 attrs==26.1.0 \
#       jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
#       typing-extensions==4.16.0
#   done
#
# They go into a scratch site folder (pip --no-index --target), typing-extensions only
# where the interpreter's is too old for referencing; the project is built from a copy of
# its sources with the image's setuptools (pip --no-index --no-build-isolation --target),
# which gives it its pytest11 entry point, so every pytest session (the inner ones of
# tests/gpu too) loads the plugin.  PYTHONPATH puts this checkout first, then that folder.
# Without pip, the wheels are unzipped and a minimal dist-info is written by hand.
#
# Environment: DLPERF_PYTHON (interpreter, default python3), DLPERF_CHECK_BUDGET (seconds
# per part, default 540), DLPERF_CHECK_WARMUP / _STEPS / _REPEATS / _RUNS (the seed cases'
# measurement, default 20 / 30 / 3 / 3), DLPERF_CHECK_KEEP=1 (keep the scratch folder),
# DLPERF_CHECK_COMMIT (the commit under test, for a copy of the tree without .git).
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

OUT=""
PART="all"
DRY=0
while (($#)); do
    case "$1" in
        --dry-run) DRY=1 ;;
        --part)
            if (($# < 2)); then echo "gpu_check.sh: --part takes 1, 2 or 3" >&2; exit 2; fi
            PART="$2"
            shift ;;
        --part=*) PART="${1#--part=}" ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "gpu_check.sh: unknown option $1" >&2; exit 2 ;;
        *)
            if [[ -n "$OUT" ]]; then echo "gpu_check.sh: one OUT_DIR, not '$OUT' and '$1'" >&2; exit 2; fi
            OUT="$1" ;;
    esac
    shift
done
if [[ -z "$OUT" ]]; then
    echo "usage: bash benchmarks/gpu_check.sh OUT_DIR [--part 1|2|3] [--dry-run]" >&2
    exit 2
fi
case "$PART" in
    1 | 2 | 3 | all) ;;
    *) echo "gpu_check.sh: --part takes 1, 2 or 3, not '$PART'" >&2; exit 2 ;;
esac

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${DLPERF_PYTHON:-python3}"
BUDGET="${DLPERF_CHECK_BUDGET:-540}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dlperf-gpu-check.XXXXXX")"
SITE="$WORK/site"
mkdir -p "$SITE"
cleanup() {
    if [[ "${DLPERF_CHECK_KEEP:-0}" == 1 ]]; then
        echo "gpu_check.sh: scratch folder kept: $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

# --------------------------------------------------------------------------- helpers

q() { printf '%q ' "$@"; }

# The commit under test: DLPERF_CHECK_COMMIT (for a copy of the tree without .git), else git's.
# The plugin records it in the results and the baseline through DLPERF_GIT_COMMIT.
if [[ -n "${DLPERF_CHECK_COMMIT:-}" ]]; then export DLPERF_GIT_COMMIT="$DLPERF_CHECK_COMMIT"; fi
commit_text() {
    if [[ -n "${DLPERF_CHECK_COMMIT:-}" ]]; then
        echo "$DLPERF_CHECK_COMMIT (DLPERF_CHECK_COMMIT)"
    elif command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1; then
        local dirty=""
        if ! git -C "$ROOT" diff --quiet HEAD 2>/dev/null; then dirty="+dirty"; fi
        echo "$(git -C "$ROOT" rev-parse --short=10 HEAD)$dirty"
    else
        echo "unknown (no git checkout; set DLPERF_CHECK_COMMIT)"
    fi
}

# `timeout` from coreutils, where there is one.
if command -v timeout >/dev/null 2>&1; then
    TIMEOUT=(timeout --signal=INT --kill-after=30)
else
    echo "gpu_check.sh: no timeout command: steps run without their time limits" >&2
    TIMEOUT=()
fi

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

PART_START=$SECONDS
RESERVE=20  # seconds kept for the bundle at the end of a part
STEPS_LOG=""  # this part's "name status seconds note" lines
STATUS=0

# The time limit of the next step: its own, within what is left of the part's budget.
limit_for() {
    local own=$1 left=$((BUDGET - (SECONDS - PART_START) - RESERVE))
    if ((left < own)); then own=$left; fi
    echo "$own"
}

# run_step NAME LIMIT LOG -- COMMAND...    (in a dry run: DRY_CMD=(...) runs instead)
# Runs COMMAND with `timeout -s INT` (its output to the console and LOG); records the
# outcome.  OK_CODES (default "0") are the exit statuses that count as success.  A shell
# function of this script (the install, the machine facts) runs without `timeout`.
run_step() {
    local name=$1 own=$2 log=$3
    shift 4
    local limit status=0 start=$SECONDS note=""
    limit="$(limit_for "$own")"
    echo
    echo "=== $name ($(now), limit ${limit} s)"
    if ((DRY)); then
        echo "DRY RUN: would run: $(q "$@")"
        if ((${#DRY_CMD[@]} == 0)); then
            echo "DRY RUN: not run here"
            STEPS_LOG+="$name not-run 0 (dry run)"$'\n'
            return 0
        fi
        set -- "${DRY_CMD[@]}"
        echo "DRY RUN: running instead: $(q "$@")"
    else
        echo "+ $(q "$@")"
    fi
    if ((limit < 10)); then
        echo "skipped: ${limit} s left of the part's ${BUDGET} s budget"
        STEPS_LOG+="$name skipped 0 out-of-time"$'\n'
        STATUS=1
        return 0
    fi
    set +e
    if declare -F "$1" >/dev/null; then
        "$@" 2>&1 | tee "$log"
    else
        if ((${#TIMEOUT[@]})); then
            "${TIMEOUT[@]}" "$limit" "$@" 2>&1 | tee "$log"
        else
            "$@" 2>&1 | tee "$log"
        fi
    fi
    status=${PIPESTATUS[0]}
    set -e
    local seconds=$((SECONDS - start))
    if ((status == 124)); then
        note="timed out after ${limit} s"
    fi
    local ok=0 code
    for code in ${OK_CODES:-0}; do
        if ((status == code)); then ok=1; fi
    done
    if ((ok)); then
        STEPS_LOG+="$name ok(exit=$status) $seconds $note"$'\n'
    else
        STEPS_LOG+="$name FAILED(exit=$status) $seconds $note"$'\n'
        STATUS=1
    fi
    echo "=== $name: exit status $status after ${seconds} s${note:+ ($note)}"
}

# --------------------------------------------------------------------------- steps

# Wheels for jsonschema and its dependencies, then the project, into $SITE; no network.
install_project() {
    (
        set -e
        echo "python: $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
        if [[ -f "$SITE/.installed" ]]; then
            echo "installed into $SITE earlier in this invocation (part 1)"
            exit 0
        fi
        if "$PY" -c 'import jsonschema' 2>/dev/null; then
            echo "jsonschema: importable already ($("$PY" -c 'import jsonschema, importlib.metadata as m; print(m.version("jsonschema"))')); no wheel installed"
        else
            local wheels=(jsonschema attrs jsonschema-specifications referencing rpds-py)
            if ! "$PY" -c 'from typing_extensions import TypeVar; TypeVar("D", default=int)' 2>/dev/null; then
                wheels+=(typing-extensions)  # referencing needs TypeVar(default=...) before Python 3.13
            fi
            if ! ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
                echo "jsonschema is missing and .whl/ has no wheels: see the download command at the top of $0"
                exit 1
            fi
            echo "+ $PY -m pip install --no-index --no-deps --no-compile --target $SITE --find-links .whl ${wheels[*]}"
            if "$PY" -m pip --version >/dev/null 2>&1; then
                "$PY" -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" \
                    --find-links "$ROOT/.whl" "${wheels[@]}"
            else
                echo "no pip: unzipping the wheels"
                "$PY" - "$SITE" "$ROOT/.whl" "${wheels[@]}" <<'PYEOF'
import re, sys, zipfile
from pathlib import Path
site, folder, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
for name in names:
    stem = name.replace("-", "_").lower()
    found = [w for w in folder.glob("*.whl") if w.name.lower().startswith(stem + "-")
             and (w.name.endswith("-none-any.whl") or f"-{tag}-" in w.name)]
    if not found:
        sys.exit(f"no wheel of {name} for {tag} in {folder}")
    zipfile.ZipFile(found[0]).extractall(site)
    print("unzipped", found[0].name)
PYEOF
            fi
            "$PY" -c 'import jsonschema; jsonschema.validate(1, {"type": "integer"}); print("jsonschema", jsonschema.__file__)'
        fi
        # The project: built from a copy of its sources (the checkout stays clean), with its
        # entry points; PYTHONPATH puts the checkout itself first.
        local src="$WORK/src"
        mkdir -p "$src"
        cp -r "$ROOT/pyproject.toml" "$ROOT/README.md" "$ROOT/pytest_dlperf" "$src/"
        echo "+ $PY -m pip install --no-index --no-deps --no-build-isolation --no-compile --target $SITE $src"
        if ! "$PY" -m pip install --quiet --no-index --no-deps --no-build-isolation --no-compile --target "$SITE" "$src"; then
            echo "pip could not build the project: writing its dist-info by hand"
            local version
            version="$("$PY" -c 'import re, sys; print(re.search(r"^version = \"(.+)\"", open(sys.argv[1]).read(), re.M).group(1))' "$ROOT/pyproject.toml")"
            local info="$SITE/pytest_dlperf-$version.dist-info"
            mkdir -p "$info"
            printf 'Metadata-Version: 2.1\nName: pytest-dlperf\nVersion: %s\n' "$version" >"$info/METADATA"
            printf '[console_scripts]\ndlperf = pytest_dlperf.cli:main\n\n[pytest11]\ndlperf = pytest_dlperf.plugin\n' >"$info/entry_points.txt"
        fi
        "$PY" - <<'PYEOF'
import importlib.metadata as m
import pytest_dlperf
plugins = [ep.value for ep in m.entry_points(group="pytest11") if ep.name == "dlperf"]
print("pytest_dlperf", m.version("pytest-dlperf"), "from", pytest_dlperf.__file__, "; pytest11:", plugins)
assert "pytest_dlperf.plugin" in plugins, plugins
import jsonschema
PYEOF
        touch "$SITE/.installed"
    )
}

# nvidia-smi, the package's environment record, pip freeze: the machine's facts.
machine_facts() {
    local dir=$1
    mkdir -p "$dir"
    if [[ -f "$WORK/part1/machine/environment.json" && "$dir" != "$WORK/part1/machine" ]]; then
        echo "the machine's facts from part 1 of this invocation"
        cp -r "$WORK/part1/machine/." "$dir/"
        cat "$dir/nvidia-smi-L.txt"
        return 0
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi -L >"$dir/nvidia-smi-L.txt" 2>&1 || true
        nvidia-smi -q >"$dir/nvidia-smi-q.txt" 2>&1 || true
        nvidia-smi topo -m >"$dir/nvidia-smi-topo.txt" 2>&1 || true
        nvidia-smi >"$dir/nvidia-smi.txt" 2>&1 || true
        cat "$dir/nvidia-smi-L.txt"
    else
        echo "nvidia-smi not found" | tee "$dir/nvidia-smi-L.txt"
    fi
    "$PY" -c 'import json, sys; from pytest_dlperf import environment; print(json.dumps(environment.collect(sys.argv[1]), indent=2))' \
        "$ROOT" >"$dir/environment.json" 2>&1 || echo "environment.collect failed: see $dir/environment.json"
    "$PY" -c 'import json, sys; from pytest_dlperf import environment as e; print("dlperf:", e.header_line(json.load(open(sys.argv[1]))))' \
        "$dir/environment.json" 2>/dev/null || true
    "$PY" -m pip freeze >"$dir/pip-freeze.txt" 2>&1 || true
}

# The GPU model as a short file name: "NVIDIA H100 80GB HBM3" -> h100.
gpu_slug() {
    if ((DRY)); then echo "cpu-dry-run"; return; fi
    local name=""
    command -v nvidia-smi >/dev/null 2>&1 && name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
    "$PY" -c '
import re, sys
words = [w for w in re.split(r"[\s_-]+", sys.argv[1].lower()) if w and w not in ("nvidia", "tesla", "geforce")]
print(next((w for w in words if re.fullmatch(r"[a-z]*\d+[a-z]*", w)), "gpu"))' "$name"
}

junit_counts() {
    "$PY" - "$1" <<'PYEOF' 2>/dev/null || echo "no JUnit XML"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
print(f"{n['tests']} tests: {passed} passed, {n['failures']} failed, {n['errors']} errors, {n['skipped']} skipped")
for case in root.iter("testcase"):
    for kind in ("failure", "error", "skipped"):
        for el in case.findall(kind):
            text = (el.get("message") or "").splitlines()[0][:200] if el.get("message") else ""
            print(f"  {kind.upper():8} {case.get('classname')}::{case.get('name')}: {text}")
PYEOF
}

write_summary() {
    local file=$1 title=$2
    shift 2
    {
        echo "$title"
        echo "date: $(now); dry run: $DRY; budget ${BUDGET} s; part took $((SECONDS - PART_START)) s"
        echo "checkout: $ROOT, commit $(commit_text)"
        echo "python: $("$PY" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)"
        echo
        echo "steps (name, status, seconds, note):"
        printf '%s' "$STEPS_LOG" | sed 's/^/  /'
        for section in "$@"; do
            echo
            printf '%s\n' "$section"
        done
    } >"$file"
    echo
    cat "$file"
}

# --------------------------------------------------------------------------- part 1

part1() {
    PART_START=$SECONDS
    STEPS_LOG=""
    local logs="$WORK/part1"
    mkdir -p "$logs"

    DRY_CMD=(install_project)
    run_step install 120 "$logs/install.log" -- install_project

    DRY_CMD=(machine_facts "$logs/machine")
    run_step machine 60 "$logs/machine.log" -- machine_facts "$logs/machine"

    # tests/gpu: on an H100 about 4 minutes (each case starts fresh workers: about 8 s each;
    # the largest-batch search about 6 trials; the 1-rank torchrun comparison 2 x 20 s;
    # compiling tiny's Triton kernels about 40 s).  Without CUDA they skip in seconds.
    local gpu_tests=("$PY" -m pytest -p no:cacheprovider -v -rA tests/gpu --junitxml="$logs/gpu-tests.xml"
        --basetemp="$logs/gpu-tests-tmp")
    DRY_CMD=(env CUDA_VISIBLE_DEVICES= "${gpu_tests[@]}")  # the skip path, even on a GPU machine
    run_step gpu-tests 300 "$logs/gpu-tests.log" -- "${gpu_tests[@]}"

    # The harness against a bare loop, resnet50 amp bs256: per run 20 warm-up + 3 x 50 steps
    # (about 0.09 s each on an H100: 15 s) plus about 8 s to start; 2 pairs of 2 sides:
    # about 90 s.  Exit status 1 is a verdict (over 2%), not a failure of the check.
    local overhead=("$PY" benchmarks/overhead.py --model resnet50 --precision amp --batch-size 256 --image-size 224
        --device cuda --warmup-steps 20 --steps 50 --repeats 3 --pairs 2 --telemetry on --json "$OUT/overhead.json")
    DRY_CMD=("$PY" benchmarks/overhead.py --model tiny --precision fp32 --batch-size 32 --image-size 32 --device cpu
        --warmup-steps 1 --steps 2 --repeats 1 --pairs 1 --telemetry on --max-overhead 1 --json "$OUT/overhead.json")
    OK_CODES="0 1" run_step overhead 150 "$logs/overhead.log" -- "${overhead[@]}"

    local ratio
    ratio="$(grep -E '^(ratio |telemetry on/off|PASS|FAIL|NOISY|device:)' "$logs/overhead.log" 2>/dev/null || echo "no ratio: see overhead.log")"
    write_summary "$OUT/part1-summary.txt" "gpu_check.sh part 1: install, tests/gpu, harness overhead" \
        "$(printf 'GPUs:\n%s\n%s' "$(sed 's/^/  /' "$logs/machine/nvidia-smi-L.txt" 2>/dev/null)" \
            "$(grep '^dlperf:' "$logs/machine.log" 2>/dev/null | sed 's/^/  /')")" \
        "$(printf 'tests/gpu: %s' "$(junit_counts "$logs/gpu-tests.xml")")" \
        "$(printf 'harness / bare loop (benchmarks/overhead.py, resnet50 amp bs256):\n%s' "$(sed 's/^/  /' <<<"$ratio")")"
    bundle_logs "$logs" "$OUT/part1-logs.tar.gz"
}

# --------------------------------------------------------------------------- part 2

part2() {
    PART_START=$SECONDS
    STEPS_LOG=""
    local logs="$WORK/part2" report="$WORK/part2/report"
    mkdir -p "$logs" "$report"

    DRY_CMD=(install_project)
    run_step install 120 "$logs/install.log" -- install_project
    DRY_CMD=(machine_facts "$logs/machine")
    run_step machine 60 "$logs/machine.log" -- machine_facts "$logs/machine"

    local slug
    slug="$(gpu_slug)"
    local baseline="$logs/$slug.json"
    # The seeds' cases (README "Baselines"; the issue's list), one GPU each, 3 fresh runs.
    # Per run: warm-up 20 + 3 windows x 30 steps = 110 steps, plus ~10 s to start (~14 s for
    # the transformers models), plus the FLOPs count.  Estimated on an H100 (s/step):
    # resnet50 fp32 0.25, tf32 0.13, amp 0.09, vgg16 amp bs128 0.05, bert-base amp bs64 0.04,
    # gpt2 bf16 bs8 0.06 -> 3 x (38 + 24 + 20 + 16 + 18 + 21) s = about 410 s.
    local warmup="${DLPERF_CHECK_WARMUP:-20}" steps="${DLPERF_CHECK_STEPS:-30}"
    local repeats="${DLPERF_CHECK_REPEATS:-3}" runs="${DLPERF_CHECK_RUNS:-3}"
    local benchmark=()
    if "$PY" -c 'import pytest_benchmark' 2>/dev/null; then
        benchmark=(--benchmark-json "$report/benchmark.json")
    fi
    local select="resnet50-fp32-bs256-gpu1 or resnet50-tf32-bs256-gpu1 or resnet50-amp-bs256-gpu1 or vgg16-amp-bs128-gpu1 or bert-base-amp-bs64-gpu1 or gpt2-bf16-bs8-gpu1"
    local outputs=(--dlperf-json "$logs/results.json" --dlperf-report "$report/report.md" --dlperf-plot "$report/plots"
        --dlperf-save-baseline "$baseline" --dlperf-log-dir "$logs/worker-logs" --junitxml "$report/seeds.xml"
        --basetemp "$logs/basetemp" "${benchmark[@]}")
    # `benchmarks`, a folder without tests, as the path: the session collects the dlperf cases
    # alone, not the plugin's own test suite (testpaths), which it would only deselect.
    local seeds=("$PY" -m pytest benchmarks -p no:cacheprovider -m dlperf --dlperf-device cuda
        --dlperf-model resnet50,vgg16,bert-base,gpt2 --dlperf-precision fp32,tf32,amp,bf16 --dlperf-batch-size 256,128,64,8
        -k "$select" --dlperf-runs "$runs" --dlperf-warmup-steps "$warmup" --dlperf-steps "$steps"
        --dlperf-repeats "$repeats" "${outputs[@]}")
    DRY_CMD=("$PY" -m pytest benchmarks -p no:cacheprovider -m dlperf --dlperf-device cpu --dlperf-model tiny
        --dlperf-precision fp32,bf16 --dlperf-batch-size 32 -k "tiny-fp32-bs32-gpu1"
        --dlperf-runs 1 --dlperf-warmup-steps 1 --dlperf-steps 2 --dlperf-repeats 1 "${outputs[@]}")
    run_step seeds 520 "$report/seeds.log" -- "${seeds[@]}"

    local baseline_note="no baseline written (see the seeds step)"
    if [[ -f "$baseline" ]]; then
        local notes
        notes="Measured by benchmarks/gpu_check.sh --part 2$( ((DRY)) && echo ' --dry-run (CPU, tiny: not a measurement)') at commit $(commit_text): warm-up ${warmup} steps, then ${repeats} windows of ${steps} steps per run, ${runs} runs per case in fresh processes (the median of their windows); synthetic data. Shorter windows than the seeds' 100 x 5 steps: a reference for regression gating on this GPU model, not a published figure."
        "$PY" - "$baseline" "$notes" "$slug" <<'PYEOF'
import json, sys
path, notes, slug = sys.argv[1:4]
with open(path, encoding="utf-8") as handle:
    document = json.load(handle)
document.setdefault("name", f"{slug}: measured by benchmarks/gpu_check.sh")
document["provenance"]["notes"] = notes
with open(path, "w", encoding="utf-8") as handle:
    json.dump(document, handle, indent=2)
    handle.write("\n")
PYEOF
        if ! "$PY" -m pytest_dlperf baseline validate "$baseline" 2>&1 | tee -a "$report/seeds.log"; then
            STATUS=1
        fi
        cp "$baseline" "$OUT/$slug.json"
        baseline_note="baseline: $slug.json ($("$PY" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$baseline") cases); copy it to baselines/$slug.json"
    fi
    if [[ -f "$logs/results.json" ]]; then
        cp "$logs/results.json" "$OUT/results.json"
    fi

    write_summary "$OUT/part2-summary.txt" "gpu_check.sh part 2: the seeds' cases on one GPU" \
        "$(printf 'GPUs:\n%s' "$(sed 's/^/  /' "$logs/machine/nvidia-smi-L.txt" 2>/dev/null)")" \
        "$(printf 'seeds: %s\n%s' "$(junit_counts "$report/seeds.xml")" \
            "$(sed -n '/= dlperf summary =/,$p' "$report/seeds.log" 2>/dev/null)")" \
        "$baseline_note"
    cp "$OUT/part2-summary.txt" "$report/"
    bundle_logs "$logs" "$OUT/part2-report.tar.gz" report install.log machine.log machine
}

# --------------------------------------------------------------------------- part 3

part3() {
    PART_START=$SECONDS
    STEPS_LOG=""
    local logs="$WORK/part3"
    mkdir -p "$logs"

    DRY_CMD=(install_project)
    run_step install 120 "$logs/install.log" -- install_project

    # Issue 12 on the GPU: a baseline of resnet50 amp bs256 (3 runs), then 10 unchanged
    # sessions and 10 whose every step trains 13 samples more than its 256 (5% less
    # throughput where the work is linear in the batch), alternating, each judged against
    # the baseline at DLPERF_CHECK_VQ_TOLERANCES (default 0.03: a 5% tolerance cannot tell a 5%
    # slowdown).  Per run: 10 warm-up + 3 x 20 steps at about 0.09 s on an H100 (6 s) plus
    # about 8 s to start; 1-2 runs a session: about 6 minutes.  --budget stops starting
    # sessions in time for the table.
    local tolerances="${DLPERF_CHECK_VQ_TOLERANCES:-0.03}"
    local vq=("$PY" benchmarks/verdict_quality.py --model resnet50 --precision amp --batch-size 256 --device cuda
        --slowdown 0.05 --sessions 10 --tolerances "$tolerances" --baseline-runs 3 --max-runs 5 --steps 10,20,3
        --budget 420 --verbose)
    DRY_CMD=("$PY" benchmarks/verdict_quality.py --model tiny --batch-size 8 --device cpu --slowdown 0.2
        --sessions 1 --tolerances 0.5 --baseline-runs 1 --max-runs 1 --steps 0,2,1 --budget 60 --verbose)
    run_step verdicts 480 "$logs/verdicts.log" -- "${vq[@]}"

    write_summary "$OUT/part3-verdicts.txt" "gpu_check.sh part 3: verdicts on the GPU (benchmarks/verdict_quality.py)" \
        "$(sed -n '/^baseline:/,$p' "$logs/verdicts.log" 2>/dev/null)"
}

# A tar.gz of a part's logs: text, JSON, XML, Markdown and PNG files under 2 MB (so neither
# the inductor cache nor a core file comes along).
bundle_logs() {
    local dir=$1 tarball=$2
    shift 2
    local list="$WORK/bundle.list"
    (cd "$dir" && find "${@:-.}" -type f -size -2M \( -name '*.log' -o -name '*.txt' -o -name '*.json' \
        -o -name '*.jsonl' -o -name '*.xml' -o -name '*.md' -o -name '*.png' -o -name '*.console' \) \
        -not -path '*inductor*' | sort) >"$list"
    tar -czf "$tarball" -C "$dir" -T "$list"
    echo "bundled $(wc -l <"$list") files into $tarball ($(du -h "$tarball" | cut -f1))"
}

# --------------------------------------------------------------------------- main

echo "gpu_check.sh: part $PART$( ((DRY)) && echo ', dry run'); output in $OUT; scratch in $WORK; python $PY"
case "$PART" in
    1) part1 ;;
    2) part2 ;;
    3) part3 ;;
    all) part1; part2; part3 ;;
esac
echo
echo "gpu_check.sh: $(find "$OUT" -maxdepth 1 -type f | wc -l) files in $OUT:"
ls -l "$OUT"
exit "$STATUS"
