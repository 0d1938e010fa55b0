"""Environment capture: its shape, the header line, the saved baseline, the GPU mismatch note."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest

from tests.fixtures import tiny_case
from pytest_dlperf import baseline, environment, jsonio, torchinfo
from pytest_dlperf.baseline.hardware import same_gpu_model
from pytest_dlperf.controller.outputs import gpu_text, header_line

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _results_with(env: dict) -> dict:
    return {"schema_version": 1, "kind": "dlperf-results", "created": "now", "environment": env,
            "options": {}, "cases": []}


def _git_repo(path) -> str:
    """A git checkout at ``path`` with one commit of a tracked file; returns the commit."""
    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q", "-b", "main")
    (path / "tracked.txt").write_text("one\n")
    git("add", "tracked.txt")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "first")
    return git("rev-parse", "HEAD").strip()


# --------------------------------------------------------------------------- collect()


def test_collect_has_the_documented_shape_on_this_machine(tmp_path):
    environment.clear_cache()
    env = environment.collect(tmp_path)
    assert set(env) >= {"host", "versions", "gpus", "topology", "git"}
    assert set(env["host"]) >= {"hostname", "os", "kernel", "cpu", "cpu_count", "cpu_cores", "memory_bytes"}
    assert env["host"]["cpu_count"] >= 1 and env["host"]["memory_bytes"] > 0
    versions = env["versions"]
    assert set(versions) >= {"python", "pytest", "pytest-dlperf", "torch", "torchvision", "transformers", "dali",
                             "nvidia-ml-py", "cuda", "cudnn", "nccl", "driver"}
    import torch

    assert versions["torch"] == torch.__version__.split("+")[0]
    dali = environment.dali_distribution()
    assert versions["dali"] == (dali[1] if dali else None)
    gpus = env["gpus"]
    assert set(gpus) >= {"count", "model", "driver", "cuda_driver", "devices", "available", "reason"}
    if gpus["count"] == 0:  # this CI machine: no NVIDIA driver
        assert not gpus["available"] and gpus["model"] is None and gpus["devices"] == []
        assert isinstance(gpus["reason"], str) and gpus["reason"]
    else:
        assert gpus["available"] and gpus["model"] and len(gpus["devices"]) == gpus["count"]
    topo = env["topology"]
    assert (topo["text"] is None) != (topo["reason"] is None)
    assert env["git"] is None  # tmp_path is not in a git checkout
    json.dumps(env)  # serialisable as it is
    jsonio.validate(_results_with(env), "results")
    # A copy each call: callers may add keys without changing the next caller's view.
    env["device"] = {"type": "cpu"}
    assert "device" not in environment.collect(tmp_path)


def test_no_nvml_library_is_a_reason_not_an_error():
    gpus = environment.nvml_gpus()
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError_LibraryNotFound:
        assert gpus == environment.summarize_gpus([], source=None, reason="NVML library not found")
    else:
        pytest.skip("NVML works on this machine")


@pytest.fixture(autouse=True)
def no_commit_variables(monkeypatch):
    """No explicit commit from the environment (CI sets GITHUB_SHA and the like): each test sets its own."""
    for commit_var, branch_var in environment.COMMIT_VARIABLES:
        monkeypatch.delenv(commit_var, raising=False)
        monkeypatch.delenv(branch_var, raising=False)


@needs_git
def test_git_records_the_commit_of_the_checkout_and_whether_it_is_dirty(tmp_path):
    commit = _git_repo(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "conftest.py").write_text("")
    subprocess.run(["git", "-C", str(tmp_path), "add", "sub/conftest.py"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit",
                    "-q", "-m", "sub"], check=True)
    commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    info = environment.git_info(tmp_path / "sub")  # a rootdir below the checkout's root: a monorepo's project
    assert info == {"commit": commit, "short": commit[:10], "branch": "main", "dirty": False,
                    "root": str(tmp_path.resolve())}
    (tmp_path / "untracked.txt").write_text("x")
    assert environment.git_info(tmp_path)["dirty"] is False  # untracked files do not count
    (tmp_path / "tracked.txt").write_text("two\n")
    assert environment.git_info(tmp_path)["dirty"] is True


@needs_git
def test_a_copy_inside_another_repository_is_not_that_repository_s_commit(tmp_path, monkeypatch):
    # The GPU run of 2026-11-25: the project copied (without .git) into a folder of another checkout.
    _git_repo(tmp_path)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "conftest.py").write_text("")  # untracked by the outer repository
    assert environment.git_info(copy) is None
    (tmp_path / ".gitignore").write_text("copy/\n")  # or ignored by it
    assert environment.git_info(copy) is None
    monkeypatch.setenv("DLPERF_GIT_COMMIT", "77766f8cad")
    assert environment.git_info(copy) == {"commit": "77766f8cad", "short": "77766f8cad", "branch": None,
                                          "dirty": False, "root": None}


@needs_git
def test_an_explicit_commit_wins_over_git_s_and_the_ci_systems_in_order(tmp_path, monkeypatch):
    commit = _git_repo(tmp_path)
    monkeypatch.setenv("GIT_COMMIT", "a" * 40)  # Jenkins
    monkeypatch.setenv("GIT_BRANCH", "origin/release")
    assert environment.git_info(tmp_path)["commit"] == "a" * 40
    assert environment.git_info(tmp_path)["branch"] == "release"
    monkeypatch.setenv("CI_COMMIT_SHA", "b" * 40)  # GitLab CI before Jenkins
    monkeypatch.setenv("GITHUB_SHA", "c" * 40)  # GitHub Actions before both
    assert environment.git_info(tmp_path)["commit"] == "c" * 40
    monkeypatch.setenv("DLPERF_GIT_COMMIT", commit)  # the plugin's own variable first of all
    info = environment.git_info(tmp_path)
    assert info["commit"] == commit and info["root"] == str(tmp_path.resolve())  # git agrees: its root is kept
    monkeypatch.setenv("DLPERF_GIT_COMMIT", "not a commit")  # not a hash: the next variable
    assert environment.git_info(tmp_path)["commit"] == "c" * 40


def test_the_topology_text_keeps_no_terminal_escape_codes(tmp_path, monkeypatch):
    # nvidia-smi topo -m underlines its legend ("\x1b[4mGPU0\x1b[0m") even into a pipe (H200, 2026-11-25).
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\nprintf '\\033[4m\\tGPU0\\tCPU Affinity\\033[0m\\nGPU0\\t X \\t0-15\\n'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    text = environment.topology()["text"]
    assert "\x1b" not in text and text.splitlines()[0] == "\tGPU0\tCPU Affinity", repr(text)
    assert environment.strip_ansi("\x1b[1;32mok\x1b[0m \x1b[?25l") == "ok "


@needs_git
def test_git_is_none_outside_a_checkout_and_without_git(tmp_path, monkeypatch):
    assert environment.git_info(tmp_path) is None
    assert environment.git_info(None) is None
    _git_repo(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no git to be found
    assert environment.git_info(tmp_path) is None


def _fake_nvidia_smi(folder, body: str, path: str) -> str:
    """``path`` behind a folder holding an ``nvidia-smi`` shell script that runs ``body``."""
    folder.mkdir(exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return f"{folder}{os.pathsep}{path}"


def test_topology_runs_nvidia_smi_or_says_why_not(tmp_path, monkeypatch):
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert environment.topology() == {"text": None, "reason": "nvidia-smi not found"}

    matrix = "\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV12\t X "
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path / "ok", f"cat <<'EOF'\n{matrix}\nEOF", path))
    assert environment.topology() == {"text": matrix.rstrip(), "reason": None}

    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path / "bad", "echo 'NVIDIA-SMI has failed' >&2; exit 9", path))
    assert environment.topology() == {"text": None,
                                      "reason": "nvidia-smi topo -m exited with 9: NVIDIA-SMI has failed"}

    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path / "hang", "exec sleep 30", path))
    monkeypatch.setattr(environment, "SUBPROCESS_TIMEOUT", 0.5)
    assert environment.topology() == {"text": None, "reason": "nvidia-smi topo -m timed out after 0.5 s"}


# --------------------------------------------------------------------------- formatting (the NVML branch)


@pytest.mark.parametrize("raw, text", [(8907, "8.9.7"), (8600, "8.6.0"), (90100, "9.1.0"), (92400, "9.24.0"),
                                       (None, None), (0, None)])
def test_cudnn_versions(raw, text):
    assert torchinfo.format_cudnn(raw) == text


@pytest.mark.parametrize("raw, text", [(12040, "12.4"), (11080, "11.8"), (13000, "13.0"), (None, None)])
def test_cuda_driver_versions(raw, text):
    assert environment.format_cuda_driver(raw) == text


H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984, "uuid": "GPU-1"}


def test_gpus_summary_from_nvml_devices():
    gpus = environment.summarize_gpus([H100, dict(H100, index=1, uuid="GPU-2")], source="nvml",
                                      driver="550.54.15", cuda_driver="12.4")
    assert (gpus["available"], gpus["reason"], gpus["count"], gpus["model"]) == (True, None, 2, H100["name"])
    assert gpu_text(gpus) == "2 x NVIDIA H100 80GB HBM3, driver 550.54.15 (CUDA 12.4)"
    mixed = environment.summarize_gpus([H100, {"index": 1, "name": "NVIDIA A100-SXM4-80GB"}], source="nvml")
    assert mixed["model"] == "NVIDIA H100 80GB HBM3 + NVIDIA A100-SXM4-80GB"
    none = environment.summarize_gpus([], source=None, reason="NVIDIA driver not loaded")
    assert gpu_text(none) == "no GPU: NVIDIA driver not loaded"


def test_header_line_of_a_gpu_machine():
    env = {"gpus": environment.summarize_gpus([H100] * 8, source="nvml", driver="550.54.15", cuda_driver="12.4"),
           "versions": {"torch": "2.4.0", "cuda": "12.4", "cudnn": "9.1.0"},
           "host": {"cpu": "Intel Xeon Platinum 8480+", "cpu_count": 224, "cpu_cores": 112,
                    "memory_bytes": 2 * 2**40},
           "git": {"commit": "a" * 40, "short": "a" * 10, "dirty": True}}
    assert header_line(env) == (
        "8 x NVIDIA H100 80GB HBM3, driver 550.54.15 (CUDA 12.4); torch 2.4.0, CUDA 12.4, cuDNN 9.1.0; "
        "Intel Xeon Platinum 8480+, 224 CPUs (112 cores), 2048 GiB; git aaaaaaaaaa+dirty")
    env["versions"] = {"torch": "2.4.0+cpu", "cuda": None}
    env["git"] = None
    assert header_line(env).endswith("torch 2.4.0+cpu, CPU-only torch; Intel Xeon Platinum 8480+, "
                                                 "224 CPUs (112 cores), 2048 GiB; not a git checkout")


@pytest.mark.parametrize("a, b, same", [
    ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB", True),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB", True),
    ("NVIDIA A100-SXM4-80GB", "nvidia a100 sxm4 80gb", True),
    ("A100", "NVIDIA A100-SXM4-80GB", True),  # the less specific name matches
    ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB", False),
    ("Tesla V100-SXM2-16GB", "NVIDIA H100 80GB HBM3", False),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A10", False),
    ("NVIDIA", "NVIDIA H100", False),  # no model at all never matches
])
def test_gpu_names_compare_without_vendor_words_and_case(a, b, same):
    assert same_gpu_model(a, b) is same
    assert same_gpu_model(b, a) is same


# --------------------------------------------------------------------------- baselines


CPU = {"type": "cpu", "name": "AMD EPYC", "index": None}
H100_DEVICE = {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "index": 0}


@pytest.mark.parametrize("hardware, env, device, note", [
    ({"gpu": "Tesla V100-SXM2-16GB"}, {}, H100_DEVICE,
     "baseline measured on Tesla V100-SXM2-16GB; this machine has NVIDIA H100 80GB HBM3"),
    ({"gpu": "Tesla V100-SXM2-16GB"}, {}, CPU,
     "baseline measured on Tesla V100-SXM2-16GB; this run is on the CPU (AMD EPYC)"),
    ({"gpu": "H100 80GB HBM3"}, {}, H100_DEVICE, None),
    ({}, {"gpus": {"model": "Tesla V100-SXM2-16GB"}}, H100_DEVICE,
     "baseline measured on Tesla V100-SXM2-16GB; this machine has NVIDIA H100 80GB HBM3"),
    ({"device": "cpu", "cpu": "AMD EPYC 7B13"}, {"gpus": {"model": "Tesla V100-SXM2-16GB"}}, CPU, None),
    ({"device": "cpu", "cpu": "AMD EPYC 7B13"}, {}, H100_DEVICE,
     "baseline measured on the CPU (AMD EPYC 7B13); this run is on NVIDIA H100 80GB HBM3"),
    ({}, {}, H100_DEVICE, None),  # the baseline does not say
    ({"device": "cuda"}, {}, H100_DEVICE, None),  # nor which GPU
])
def test_device_mismatch_notes(hardware, env, device, note):
    assert baseline.device_mismatch(baseline.measured_on(hardware, env), device) == note


def test_a_saved_baseline_names_the_gpu_and_its_count():
    env = {"host": {"hostname": "box", "cpu": "Xeon", "memory_bytes": 2**40},
           "gpus": {"count": 8, "model": "NVIDIA H100 80GB HBM3"}, "device": H100_DEVICE}
    assert baseline.hardware_from(env) == {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "gpus_per_node": 8,
                                           "cpu": "Xeon", "memory": "1024 GiB"}


# --------------------------------------------------------------------------- plugin runs


@needs_git
def test_header_line_and_the_saved_baseline_record_the_environment(dlperf):
    commit = _git_repo(dlperf.path)
    env = environment.collect(dlperf.path)
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-runs", "1", "--dlperf-save-baseline", "saved.json")
    result.assert_outcomes(passed=1)
    import torch

    result.stdout.fnmatch_lines([
        "dlperf: device cpu, no baseline",
        f"dlperf: {gpu_text(env['gpus'])}; torch {torch.__version__.split('+')[0]}*; "
        f"{env['host']['cpu']}, * CPUs*; git {commit[:10]}",
    ])
    saved = json.loads((dlperf.path / "saved.json").read_text())
    jsonio.validate(saved, "baseline")
    recorded = saved["environment"]
    assert recorded["git"]["commit"] == commit and recorded["git"]["dirty"] is False
    assert recorded["gpus"]["count"] == env["gpus"]["count"] and recorded["gpus"]["reason"] == env["gpus"]["reason"]
    assert recorded["host"]["cpu"] == env["host"]["cpu"] and recorded["versions"]["torch"]
    assert recorded["device"]["type"] == "cpu"
    assert saved["hardware"]["device"] == "cpu" and saved["hardware"]["cpu"] == recorded["device"]["name"]
    assert saved["provenance"]["software"]["torch"] == recorded["versions"]["torch"]


def test_a_gpu_baseline_on_a_cpu_run_is_noted_in_the_verdict_summary_and_results(dlperf):
    path = dlperf.baseline([tiny_case(1.0)], hardware={"gpu": "Tesla V100-SXM2-16GB", "gpus_per_node": 8})
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-json", "results.json", "--dlperf-max-runs", "1")
    result.assert_outcomes(passed=1)
    note = "baseline measured on Tesla V100-SXM2-16GB; this run is on the CPU (*)"
    result.stdout.fnmatch_lines([
        "improved: update the baseline (1):",
        "  IMPROVED tiny-fp32-bs32-gpu1: * img/s, *% above 1.0 (tolerance 5%, 98% CI *, 1 run)",
        "      faster than the tolerance: *",
        f"      {note}",
        "dlperf: 1 improved",
        f"dlperf: {note}",
    ])
    data = dlperf.results()
    jsonio.validate(data, "results")
    record = data["cases"][0]
    assert record["hardware_mismatch"] == data["baseline"]["hardware_mismatch"]
    assert record["hardware_mismatch"].startswith("baseline measured on Tesla V100-SXM2-16GB; this run is on the CPU")
    assert record["message"].endswith(record["hardware_mismatch"])
    assert data["environment"]["gpus"]["count"] == environment.collect(dlperf.path)["gpus"]["count"]


def test_a_copy_without_git_names_its_commit_through_the_environment(tmp_path, monkeypatch):
    from pytest_dlperf.environment import git_info

    monkeypatch.delenv("DLPERF_GIT_COMMIT", raising=False)
    assert git_info(tmp_path) is None
    monkeypatch.setenv("DLPERF_GIT_COMMIT", "3fa2c1e9b04d7e")
    monkeypatch.setenv("DLPERF_GIT_BRANCH", "main")
    assert git_info(tmp_path) == {"commit": "3fa2c1e9b04d7e", "short": "3fa2c1e9b0", "branch": "main",
                                  "dirty": False, "root": None}
    monkeypatch.setenv("DLPERF_GIT_COMMIT", "not a commit; rm -rf /")
    assert git_info(tmp_path) is None


# --------------------------------------------------------------------------- without torch in the controller


def write_torch(folder, version_py: str):
    package = folder / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('this stand-in is read, never imported')\n")
    (package / "version.py").write_text(version_py)
    return folder


def test_torch_s_versions_read_from_its_files_agree_with_the_imported_torch():
    read = torchinfo.torch_versions_unimported()
    if read is None:
        pytest.skip("this torch's files do not say its cuDNN and NCCL (not a CUDA wheel with NVIDIA's wheels)")
    assert read == torchinfo.torch_versions_imported()
    assert torchinfo.torch_build()["__version__"].split("+")[0] == environment.dist_version("torch").split("+")[0]


@pytest.mark.parametrize(("text", "expected"), [
    ("__version__ = '2.14.1+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n",
     {"cuda": None, "cudnn": None, "nccl": None}),  # a CPU build: nothing to import torch for
    ("__version__ = '2.14.1+rocm7.0'\ncuda: Optional[str] = None\nhip: Optional[str] = '7.0.1'\n", None),
    ("__version__ = '2.14.1+cu999'\ncuda: Optional[str] = '999.0'\nhip = None\n", None),  # no nvidia-*-cu999 wheels
    ("cuda = '13.0'\n", None),  # no __version__: not torch's file
])
def test_what_torch_s_files_cannot_say_falls_back_to_importing_it(tmp_path, monkeypatch, text, expected):
    monkeypatch.syspath_prepend(str(write_torch(tmp_path, "from typing import Optional\n" + text)))
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    monkeypatch.setattr(torchinfo.importlib.util, "find_spec",
                        lambda name: type("Spec", (), {"submodule_search_locations": [str(tmp_path / "torch")]})())
    assert torchinfo.torch_versions_unimported() == expected


def test_a_cpu_session_s_controller_never_imports_torch(pytester):
    # A pytest session's start: torch is the workers' (and their fork server's) to import, not the controller's.
    if not torchinfo.no_gpu_device_files() or torchinfo.torch_versions_unimported() is None:
        pytest.skip("GPU device files here, or a torch whose files do not say its versions: the controller asks torch")
    pytester.makeconftest("""
        import sys
        def pytest_unconfigure(config):
            print("torch in the controller:", "torch" in sys.modules)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
                                           "--dlperf-device", "cpu", "--dlperf-model", "tiny", "--dlperf-steps", "2",
                                           "--dlperf-warmup-steps", "0", "-o", "dlperf_repeats=1",
                                           "-o", "dlperf_max_interference=off", "-m", "dlperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*torch 2*CUDA*", "torch in the controller: False"])
