#!/usr/bin/env bash
# The check on a lent GPU (issues 16 and 27): two back-to-back commands, 12 minutes of command time
# in all, spent first on what has never been measured on a GPU.
#
#   bash benchmarks/gpu_check.sh OUT_DIR --command 1|2 [--dry-run]
#   bash benchmarks/gpu_check.sh --plan
#
#   --command 1   (400 s) install; machine facts; the verdicts on the GPU: benchmarks/verdict_quality.py,
#                 resnet50 amp bs256, a baseline it saves, then up to 10 unchanged and 10 slowed-by-5%
#                 sessions, alternating, judged at a 3% tolerance; its kept sessions (for replays
#                 under another rule: verdict_rejudge.py) and the baseline (for command 2)
#   --command 2   (320 s) install; forked against fresh workers (benchmarks/start_modes.py, resnet50 and
#                 bert-base amp bs64, alternating: the ratios); NVIDIA's own ResNet-50 script beside the built-in resnet50
#                 (benchmarks/ngc_side_by_side.py: both figures and their ratio); one unchanged session
#                 while another process runs matrix products on the same GPU (verdict_quality.py
#                 --gpu-busy-sessions: busy, never a regression); an A/B session of resnet50 against itself
#                 and against a reference 5% faster (benchmarks/ab_quality.py); where the time of a one-rank DDP step
#                 and of BERT's step goes (benchmarks/gpu_diagnose.py); BERT's recipe variants side by side
#                 (benchmarks/bert_recipes.py: seq/s and GPU utilization); then, as time allows, the plugin's own
#                 proof: tests/gpu, the seeds' cases and a baseline, the harness overhead
#   --skip S,...  leave out the named steps of the command (never install): what an earlier lent GPU
#                 measured already, so that what it could not reach gets the time (named in the summary)
#   --plan        print the plan (commands, steps, budgets) and exit
#   --dry-run     on any machine, in a few minutes of CPU: print every command a real run would run,
#                 and run CPU-safe versions instead (tiny settings; tests/gpu skip without CUDA); the
#                 same bundle layout comes out
#
# A step that does not fit what is left of its command's budget is skipped and named in the
# summary ("left out for lack of time").
#
# Each command gives itself a budget (400 and 320 s; DLPERF_CHECK_BUDGET overrides the one
# running) and every step a time limit within what is left (`timeout -s INT`: pytest still writes
# its JUnit XML and the plugin its JSON and report). A step cut off by its limit, or one that
# fails, is reported; the next step still runs. Run the two commands back to back on one machine:
# command 2 judges its GPU-busy session against command 1's baseline (kept in
# out/gpu-check-state/, git-ignored); on a fresh machine it saves one of its own first.
#
# OUT_DIR receives at most 8 files per command, and nothing else:
#   command1-summary.txt   what ran, how long; verdict_quality's table and every session's message
#   command1-logs.tar.gz   install log, nvidia-smi -L/-q/topo, environment.json, pip freeze,
#                          verdicts.log, the kept sessions (verdict-sessions/*.json), the baseline
#   command2-summary.txt   what ran, how long, what was left out; the NGC lines and ratio; the
#                          GPU-busy session; gpu_diagnose's and bert_recipes' tables; tests/gpu counts;
#                          the seeds' summary
#   command2-logs.tar.gz   every step's log and JSON: ngc-results.json, the GPU-busy session,
#                          diagnose.json, bert-recipes.json, tests/gpu output + JUnit XML, the seeds' report and plots
#   results.json, <gpu>.json   the seeds' results and measured baseline (h200.json, ...; in a dry
#                          run cpu-dry-run.json), when the seeds ran: copy it to baselines/
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
# NVIDIA's code for the side-by-side step (never committed; with the device tool, carry ".peer"):
# ConvNets and dllogger, from copies of github.com/NVIDIA/DeepLearningExamples and NVIDIA/dllogger:
#
#   mkdir -p .peer && git -C DeepLearningExamples archive HEAD PyTorch/Classification/ConvNets \
#     | tar -x -C .peer && mv .peer/PyTorch/Classification/ConvNets .peer/convnets && rm -r .peer/PyTorch
#   git -C dllogger archive --prefix=dllogger/ HEAD | tar -x -C .peer
#
# (DLPERF_CHECK_CONVNETS and DLPERF_CHECK_DLLOGGER name other places.)
#
# The wheels go into a scratch site folder (pip --no-index --target), typing-extensions only
# where the interpreter's is too old for referencing; the project is built from a copy of
# its sources with the image's setuptools (pip --no-index --no-build-isolation --target),
# which gives it its pytest11 entry point, so every pytest session (the inner ones of
# tests/gpu too) loads the plugin.  PYTHONPATH puts this checkout first, then that folder.
# Without pip, the wheels are unzipped and a minimal dist-info is written by hand.
#
# Environment: DLPERF_PYTHON (interpreter, default python3), DLPERF_CHECK_BUDGET (seconds of the
# command, default 400 or 320), DLPERF_CHECK_VQ_SESSIONS (verdict sessions of each kind, 10),
# DLPERF_CHECK_WARMUP / _STEPS / _REPEATS / _RUNS (the seed cases' measurement, default 20 / 30 /
# 3 / 1), DLPERF_CHECK_KEEP=1 (keep the scratch folder), DLPERF_CHECK_COMMIT (the commit under
# test, for a copy of the tree without .git).
set -euo pipefail

# The plan: "command step seconds least" (a step's own time limit, and the least time it can do
# anything useful in), in the order the steps run. A command's budget caps them all: a step starts
# with what is left, or is skipped when that is less than its least.
# tests/test_gpu_check.py checks the budgets' sum (at most 12 minutes) and this order.
COMMAND_BUDGETS=(400 320)
PLAN="
1 install 30 10
1 machine 20 10
1 verdicts 360 120
2 install 30 10
2 starts 180 90
2 ngc 110 60
2 gpu-busy 100 60
2 ab 200 90
2 diagnose 75 40
2 bert-recipes 240 90
2 gpu-tests 450 60
2 seeds 280 120
2 overhead 150 90
"

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

print_plan() {
    local total=0 c
    echo "gpu_check.sh plan: two back-to-back commands; each step gets its own limit or what is left of its command's budget"
    for c in 1 2; do
        local budget=${COMMAND_BUDGETS[$((c - 1))]}
        total=$((total + budget))
        echo "command $c: budget ${budget} s"
        awk -v c="$c" '$1 == c { printf "  %-10s up to %4d s (skipped with less than %d s left)\n", $2, $3, $4 }' <<<"$PLAN"
    done
    echo "commands in all: ${total} s"
}

OUT=""
COMMAND=""
DRY=0
SKIP=""
while (($#)); do
    case "$1" in
        --dry-run) DRY=1 ;;
        --plan) print_plan; exit 0 ;;
        --command)
            if (($# < 2)); then echo "gpu_check.sh: --command takes 1 or 2" >&2; exit 2; fi
            COMMAND="$2"
            shift ;;
        --command=*) COMMAND="${1#--command=}" ;;
        --skip)
            if (($# < 2)); then echo "gpu_check.sh: --skip takes a comma-separated list of steps" >&2; exit 2; fi
            SKIP="$2"
            shift ;;
        --skip=*) SKIP="${1#--skip=}" ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "gpu_check.sh: unknown option $1" >&2; exit 2 ;;
        *)
            if [[ -n "$OUT" ]]; then echo "gpu_check.sh: one OUT_DIR, not '$OUT' and '$1'" >&2; exit 2; fi
            OUT="$1" ;;
    esac
    shift
done
if [[ -z "$OUT" || -z "$COMMAND" ]]; then
    echo "usage: bash benchmarks/gpu_check.sh OUT_DIR --command 1|2 [--dry-run] (or --plan)" >&2
    exit 2
fi
case "$COMMAND" in
    1 | 2) ;;
    *) echo "gpu_check.sh: --command takes 1 or 2, not '$COMMAND'" >&2; exit 2 ;;
esac
for step in ${SKIP//,/ }; do
    if [[ "$step" == install ]] || ! awk -v c="$COMMAND" -v s="$step" '$1 == c && $2 == s { found = 1 } END { exit !found }' <<<"$PLAN"; then
        echo "gpu_check.sh: --skip: '$step' is not a step of command $COMMAND that can be left out (the plan: --plan)" >&2
        exit 2
    fi
done

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${DLPERF_PYTHON:-python3}"
# A dry run has four times the budget and every step four times its limit, and counts busy runs (--max-interference off): it checks what runs, not how
# long, and its CPU versions run on machines that may be busy.
SLACK=$( ((DRY)) && echo 4 || echo 1)
BUDGET="${DLPERF_CHECK_BUDGET:-$((SLACK * ${COMMAND_BUDGETS[$((COMMAND - 1))]}))}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dlperf-gpu-check.XXXXXX")"
SITE="$WORK/site"
# What command 2 takes from command 1 on the same machine (git-ignored; a dry run keeps its own).
STATE="$ROOT/out/gpu-check-state$( ((DRY)) && echo -dry-run || true)"
CONVNETS="${DLPERF_CHECK_CONVNETS:-$ROOT/.peer/convnets}"
DLLOGGER="${DLPERF_CHECK_DLLOGGER:-$ROOT/.peer/dllogger}"
mkdir -p "$SITE" "$STATE"
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

# The plan's own limit of a step of this command, and the least time it needs.
own_limit() {
    awk -v c="$COMMAND" -v s="$1" '$1 == c && $2 == s { print $3 }' <<<"$PLAN"
}
least_for() {
    awk -v c="$COMMAND" -v s="$1" '$1 == c && $2 == s { print $4 }' <<<"$PLAN"
}

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
RESERVE=20  # seconds kept for the bundle at the end of a command
STEPS_LOG=""  # this command's "name status seconds note" lines
STATUS=0

# The time limit of the next step: its own, within what is left of the command's budget.
limit_for() {
    local own=$(($1 * SLACK)) left=$((BUDGET - (SECONDS - PART_START) - RESERVE))
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
    if [[ ",$SKIP," == *",$name,"* ]]; then
        echo "skipped: --skip $name"
        STEPS_LOG+="$name skipped 0 --skip"$'\n'
        return 0
    fi
    local least
    least="$(least_for "$name")"
    if ((limit < ${least:-10})); then
        echo "skipped: ${limit} s left of the command's ${BUDGET} s budget"
        STEPS_LOG+="$name skipped 0 out-of-time"$'\n'
        return 0  # left out for lack of time: named in the summary, not a failure
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
            echo "installed into $SITE earlier in this invocation"
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
    "$PY" -c 'import json, sys; from pytest_dlperf.controller.outputs import header_line; print("dlperf:", header_line(json.load(open(sys.argv[1]))))' \
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
        echo "date: $(now); dry run: $DRY; budget ${BUDGET} s; command took $((SECONDS - PART_START)) s"
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

# The steps left out (for time, --skip or another reason), one per line, or "nothing".
left_out() {
    local steps
    steps="$(printf '%s' "$STEPS_LOG" | awk '$2 == "skipped" { gsub("_", " ", $4); print "  " $1 " (" $4 ")" }')"
    printf 'left out:\n%s' "${steps:-  nothing}"
}

# skip_step NAME WHY: a step left out for another reason than time (named in the summary).
skip_step() {
    echo
    echo "=== $1: left out: $2"
    STEPS_LOG+="$1 skipped 0 ${2// /_}"$'\n'
}

# --------------------------------------------------------------------------- command 1

command1() {
    local logs="$WORK/command1"
    mkdir -p "$logs"

    DRY_CMD=(install_project)
    run_step install "$(own_limit install)" "$logs/install.log" -- install_project
    DRY_CMD=(machine_facts "$logs/machine")
    run_step machine "$(own_limit machine)" "$logs/machine.log" -- machine_facts "$logs/machine"

    # Issues 12 and 26 on the GPU, the user's path: a baseline of resnet50 amp bs256 saved as a user
    # saves one (10 counted runs) with --dlperf-tolerance 0.03 (a 5% tolerance cannot tell a 5% slowdown),
    # then unchanged sessions and sessions whose every step trains 13 samples more than its 256 (5% less
    # throughput where the work is linear in the batch), alternating, each judged at the saved tolerance
    # with the default run budget.  On an H200 (2026-11-26) a run was about 9 s of start and 4 s of
    # steps: the save about 130 s, a session about 20 s (one run) to 35 s (two).  --budget stops
    # starting sessions 50 s before the step's limit, in time for the table.
    local limit sessions="${DLPERF_CHECK_VQ_SESSIONS:-10}"
    limit="$(limit_for "$(own_limit verdicts)")"
    rm -f "$STATE/verdict-baseline.json"
    local vq=("$PY" benchmarks/verdict_quality.py --model resnet50 --precision amp --batch-size 256 --device cuda
        --slowdown 0.05 --sessions "$sessions" --user-path --save-tolerance 0.03 --steps 5,20,3
        --budget $((limit > 60 ? limit - 50 : 10)) --verbose --keep "$logs/verdict-sessions"
        --baseline-file "$STATE/verdict-baseline.json")
    DRY_CMD=("$PY" benchmarks/verdict_quality.py --model tiny --batch-size 8 --device cpu --slowdown 0.2
        --sessions 1 --tolerances 0.5 --baseline-runs 1 --max-runs 1 --steps 0,2,1 --budget 120 --verbose
        --max-interference off --keep "$logs/verdict-sessions" --baseline-file "$STATE/verdict-baseline.json")
    run_step verdicts "$(own_limit verdicts)" "$logs/verdicts.log" -- "${vq[@]}"
    if [[ -f "$STATE/verdict-baseline.json" ]]; then cp "$STATE/verdict-baseline.json" "$logs/"; fi

    write_summary "$OUT/command1-summary.txt" "gpu_check.sh command 1: the verdicts on the GPU" "$(left_out)" \
        "$(printf 'GPUs:\n%s\n%s' "$(sed 's/^/  /' "$logs/machine/nvidia-smi-L.txt" 2>/dev/null)" \
            "$(grep '^dlperf:' "$logs/machine.log" 2>/dev/null | sed 's/^/  /')")" \
        "$(printf 'verdicts (benchmarks/verdict_quality.py):\n%s' "$(sed -n '/^baseline:/,$p' "$logs/verdicts.log" 2>/dev/null)")"
    bundle_logs "$logs" "$OUT/command1-logs.tar.gz"
}

# --------------------------------------------------------------------------- command 2

command2() {
    local logs="$WORK/command2" report="$WORK/command2/report"
    mkdir -p "$logs" "$report"

    DRY_CMD=(install_project)
    run_step install "$(own_limit install)" "$logs/install.log" -- install_project

    # Issue 42: a worker forked by the fork server against a fresh one, resnet50 and bert-base amp bs64 (steps the
    # host sets the pace of), one untimed run then 3 rounds of both, alternating: the ratios (goal: within 3%), each
    # run's GPU utilization and host time per step, and what differs between the two processes.  About 10 s a run.
    # Exit status 1 is a finding (a ratio more than 3% off), not a failure of the check.
    local starts=("$PY" benchmarks/start_modes.py --device cuda --cases resnet50:amp:64,bert-base:amp:64
        --alternations 3 --steps 20,30,3 --json "$logs/starts.json")
    DRY_CMD=("$PY" benchmarks/start_modes.py --device cpu --cases tiny:fp32:32 --alternations 1 --steps 1,2,1
        --no-untimed --max-difference 10 --json "$logs/starts.json")  # every path; its figures mean nothing
    OK_CODES="0 1" run_step starts "$(own_limit starts)" "$logs/starts.log" -- "${starts[@]}"

    # NVIDIA's ConvNets main.py (the NGC figures' script) beside the built-in resnet50, amp bs256, one
    # session, 2 runs each: warm-up 20, then 3 windows of 30 steps.  About 20 s a run of main.py (it
    # sleeps 5 s after its last step) and 18 s a run of the built-in one.
    local ngc=("$PY" benchmarks/ngc_side_by_side.py --convnets "$CONVNETS" --dllogger "$DLLOGGER" --device cuda
        --precision amp --batch-size 256 --runs 2 --steps 20,30,3 --json "$logs/ngc-results.json")
    DRY_CMD=("$PY" benchmarks/ngc_side_by_side.py --convnets "$CONVNETS" --dllogger "$DLLOGGER" --device cpu
        --precision fp32 --batch-size 2 --runs 1 --steps 0,1,1 --json "$logs/ngc-results.json")
    if [[ -f "$CONVNETS/main.py" && -f "$DLLOGGER/dllogger/__init__.py" ]]; then
        run_step ngc "$(own_limit ngc)" "$logs/ngc.log" -- "${ngc[@]}"
    else
        skip_step ngc "no copy of NVIDIA's ConvNets and dllogger at $CONVNETS and $DLLOGGER (see --help)"
    fi

    # One unchanged session while another process keeps the GPU busy with matrix products: NVML
    # lists it beside the case, so each run is busy; the session must end inconclusive, never fail.
    # Against command 1's baseline (a baseline of one run where this machine has none).  On an H200
    # (2026-11-26) two busy runs and the wait between them took more than 60 s.
    local busy=("$PY" benchmarks/verdict_quality.py --model resnet50 --precision amp --batch-size 256 --device cuda
        --sessions 0 --gpu-busy-sessions 1 --tolerances 0.03 --baseline-runs 1 --max-runs 2 --steps 5,20,3
        --verbose --keep "$logs/gpu-busy-sessions" --baseline-file "$STATE/verdict-baseline.json")
    DRY_CMD=("$PY" benchmarks/verdict_quality.py --model tiny --batch-size 8 --device cpu --sessions 0
        --gpu-busy-sessions 1 --tolerances 0.5 --baseline-runs 1 --max-runs 1 --steps 0,2,1 --verbose
        --max-interference off --keep "$logs/gpu-busy-sessions" --baseline-file "$STATE/verdict-baseline.json")
    run_step gpu-busy "$(own_limit gpu-busy)" "$logs/gpu-busy.log" -- "${busy[@]}"

    # An A/B session (--dlperf-against, issue 38), resnet50 amp bs256: the same interpreter as both sides (no
    # FAIL), then a reference 5% faster (the candidate trains 13 samples more a step: caught), at a 3% tolerance
    # (at the default 5% a 4.8% slowdown cannot fail); pairs of two fresh runs, each side forked by its own
    # server, at most 6 (a decision needs 4).  The dry run only checks the script's wiring.
    local ab=("$PY" benchmarks/ab_quality.py --model resnet50 --device cuda --precision amp --batch-size 256
        --more-work 0.05 --sessions 1 --neighbour-sessions 0 --steps 5,20,3 --max-pairs 6 --show
        --pytest-args "--dlperf-tolerance 0.03")
    DRY_CMD=("$PY" benchmarks/ab_quality.py --sessions 0 --neighbour-sessions 0)
    run_step ab "$(own_limit ab)" "$logs/ab.log" -- "${ab[@]}"

    # Where a one-rank DDP step's time goes against the plain step's, and why BERT's GPU idles.
    local limit
    limit="$(limit_for "$(own_limit diagnose)")"
    local diag=("$PY" benchmarks/gpu_diagnose.py --device cuda --repeats 2 --rounds 1 --budget $((limit > 30 ? limit - 15 : 10))
        --json "$logs/diagnose.json")
    DRY_CMD=("$PY" benchmarks/gpu_diagnose.py --device cpu --quick --rounds 1 --json "$logs/diagnose.json")  # one round of tiny, bert-tiny: 10 CPU-s
    run_step diagnose "$(own_limit diagnose)" "$logs/diagnose.log" -- "${diag[@]}"

    # bert-base amp bs64 seq128 step variants side by side (issue 42: which recipe keeps the GPU busy): each
    # built and compiled once, untimed, then 4 rounds in rotated order, each variant's seq/s and mean GPU
    # utilization; --budget stops building variants at 60% of it and starting rounds at its end.
    limit="$(limit_for "$(own_limit bert-recipes)")"
    local recipes=("$PY" benchmarks/bert_recipes.py --rounds 4 --repeats 2 --budget $((limit > 40 ? limit - 20 : 10))
        --json "$logs/bert-recipes.json")
    DRY_CMD=("$PY" benchmarks/bert_recipes.py --dry-run --json "$logs/bert-recipes.json")
    run_step bert-recipes "$(own_limit bert-recipes)" "$logs/bert-recipes.log" -- "${recipes[@]}"

    # tests/gpu: on an H200 about 390 s on 2026-11-27, with bert's compiled recipe more (each case starts fresh
    # workers: about 8 s each; the largest-batch search about 6 trials; the 1-rank torchrun comparison 2 x 25 s; compile 25 s).
    # Without CUDA they skip in seconds.
    local gpu_tests=("$PY" -m pytest -p no:cacheprovider -v -rA tests/gpu --junitxml="$logs/gpu-tests.xml"
        --basetemp="$logs/gpu-tests-tmp")
    DRY_CMD=(env CUDA_VISIBLE_DEVICES= "${gpu_tests[@]}")  # the skip path, even on a GPU machine
    run_step gpu-tests "$(own_limit gpu-tests)" "$logs/gpu-tests.log" -- "${gpu_tests[@]}"

    seeds_step "$logs" "$report"

    # The harness against a bare loop, resnet50 amp bs256: 2 pairs of 2 sides, about 90 s.  Exit
    # status 1 is a verdict (over 2%), not a failure of the check.
    local overhead=("$PY" benchmarks/overhead.py --model resnet50 --precision amp --batch-size 256 --image-size 224
        --device cuda --warmup-steps 20 --steps 50 --repeats 3 --pairs 2 --telemetry on --json "$logs/overhead.json")
    DRY_CMD=("$PY" benchmarks/overhead.py --model tiny --precision fp32 --batch-size 32 --image-size 32 --device cpu
        --warmup-steps 1 --steps 2 --repeats 1 --pairs 1 --telemetry on --max-overhead 1 --json "$logs/overhead.json")
    OK_CODES="0 1" run_step overhead "$(own_limit overhead)" "$logs/overhead.log" -- "${overhead[@]}"

    write_summary "$OUT/command2-summary.txt" \
        "gpu_check.sh command 2: NVIDIA's script beside the plugin, a busy GPU, diagnostics, the plugin's proof" \
        "$(left_out)" \
        "$(printf 'forked / fresh workers (benchmarks/start_modes.py):\n%s' "$(grep -E 'forked / fresh|^  differs:' "$logs/starts.log" 2>/dev/null | cut -c1-400 | sed 's/^/  /')")" \
        "$(printf 'NGC side by side (benchmarks/ngc_side_by_side.py):\n%s' "$(grep -E '^(ngc-rn50|resnet50): |^ngc-rn50 / resnet50' "$logs/ngc.log" 2>/dev/null | cut -c1-400 | sed 's/^/  /')")" \
        "$(printf 'GPU busy (verdict_quality.py --gpu-busy-sessions):\n%s' "$(sed -n '/^baseline:/,$p' "$logs/gpu-busy.log" 2>/dev/null)")" \
        "$(printf 'A/B (benchmarks/ab_quality.py):\n%s' "$(cat "$logs/ab.log" 2>/dev/null)")" \
        "$(printf 'diagnostics (benchmarks/gpu_diagnose.py):\n%s' "$(grep -vE '\(round [0-9]+\)$' "$logs/diagnose.log" 2>/dev/null)")" \
        "$(printf 'BERT recipes (benchmarks/bert_recipes.py):\n%s' "$(sed -n '/the median of each variant/,$p' "$logs/bert-recipes.log" 2>/dev/null)")" \
        "$(printf 'tests/gpu: %s' "$(junit_counts "$logs/gpu-tests.xml")")" \
        "$(printf 'seeds: %s\n%s' "$(junit_counts "$report/seeds.xml")" \
            "$(sed -n '/= dlperf summary =/,$p' "$report/seeds.log" 2>/dev/null)")" \
        "$(printf 'harness / bare loop (benchmarks/overhead.py):\n%s' "$(sed -n '/^device:/,$p' "$logs/overhead.log" 2>/dev/null | sed 's/^/  /')")"
    bundle_logs "$logs" "$OUT/command2-logs.tar.gz"
}

# The seeds' cases on one GPU (README "Baselines"), one fresh run each by default, with the JSON
# results, the report, plots and a measured baseline.  Per run: warm-up 20 + 3 windows x 30
# steps, plus 8-14 s to start: on an H200 (2026-11-25) 164 s for the six cases.
seeds_step() {
    local logs=$1 report=$2
    local slug
    slug="$(gpu_slug)"
    local baseline="$logs/$slug.json"
    local warmup="${DLPERF_CHECK_WARMUP:-20}" steps="${DLPERF_CHECK_STEPS:-30}"
    local repeats="${DLPERF_CHECK_REPEATS:-3}" runs="${DLPERF_CHECK_RUNS:-1}"
    local benchmark=()
    if "$PY" -c 'import pytest_benchmark' 2>/dev/null; then
        benchmark=(--benchmark-json "$report/benchmark.json")
    fi
    local select="resnet50-fp32-bs256-gpu1 or resnet50-tf32-bs256-gpu1 or resnet50-amp-bs256-gpu1 or vgg16-amp-bs128-gpu1 or bert-base-amp-bs64-gpu1 or gpt2-bf16-bs8-gpu1"
    local outputs=(--dlperf-json "$logs/results.json" --dlperf-report "$report/report.md" --dlperf-plot "$report/plots"
        --dlperf-save-baseline "$baseline" --dlperf-log-dir "$logs/worker-logs" --junitxml "$report/seeds.xml"
        --basetemp "$logs/basetemp" "${benchmark[@]}")
    # `benchmarks`, a folder without tests, as the path: the session collects the dlperf cases
    # alone, not the plugin's own test suite (testpaths), which it would only deselect.  --noconftest:
    # nor the suite's conftest.py at the root, whose plugins (tests/fixtures.py, ...) would import torchvision
    # and matplotlib into the controller and start its test helpers, 5 s of CPU for nothing.
    local seeds=("$PY" -m pytest benchmarks -p no:cacheprovider --noconftest -m dlperf --dlperf-device cuda
        --dlperf-model resnet50,vgg16,bert-base,gpt2 --dlperf-precision fp32,tf32,amp,bf16 --dlperf-batch-size 256,128,64,8
        -k "$select" --dlperf-runs "$runs" --dlperf-warmup-steps "$warmup" --dlperf-steps "$steps"
        -o "dlperf_repeats=$repeats" "${outputs[@]}")
    DRY_CMD=("$PY" -m pytest benchmarks -p no:cacheprovider --noconftest -m dlperf --dlperf-device cpu
        --dlperf-model tiny --dlperf-precision fp32,bf16 --dlperf-batch-size 32 -k "tiny-fp32-bs32-gpu1"
        --dlperf-runs 1 --dlperf-max-runs 1 --dlperf-warmup-steps 1 --dlperf-steps 2 -o dlperf_repeats=1
        -o dlperf_max_interference=off "${outputs[@]}")  # busy runs count: the save must come out beside a test suite
    run_step seeds "$(own_limit seeds)" "$report/seeds.log" -- "${seeds[@]}"

    if [[ -f "$baseline" ]]; then
        local notes
        notes="Measured by benchmarks/gpu_check.sh --command 2$( ((DRY)) && echo ' --dry-run (CPU, tiny: not a measurement)' || true) at commit $(commit_text): warm-up ${warmup} steps, then ${repeats} windows of ${steps} steps per run, ${runs} run(s) per case in fresh processes (a run's figure is the median of its windows, the case's the geometric mean of its runs'); synthetic data. Shorter windows than the seeds' 100 x 5 steps: a reference for regression gating on this GPU model, not a published figure."
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
    fi
    if [[ -f "$logs/results.json" ]]; then
        cp "$logs/results.json" "$OUT/results.json"
    fi
}

# A tar.gz of a command's logs: text, JSON, XML, Markdown and PNG files under 2 MB (so neither
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

echo "gpu_check.sh: command $COMMAND$( ((DRY)) && echo ', dry run'); budget ${BUDGET} s; output in $OUT; scratch in $WORK; python $PY"
print_plan
PART_START=$SECONDS
case "$COMMAND" in
    1) command1 ;;
    2) command2 ;;
esac
echo
echo "gpu_check.sh: $(find "$OUT" -maxdepth 1 -type f | wc -l) files in $OUT:"
ls -l "$OUT"
exit "$STATUS"
