"""Hostile documents and hostile output paths (issue 11): the reader refuses what no valid
document holds, in one line naming the file and the place; the writer writes through links,
never onto devices, FIFOs or folders, and never leaves half a file behind."""

import json
import os
import stat

import pytest

from pytest_dlperf import baseline, jsonio

ENTRY = {"model": "tiny", "precision": "fp32", "batch_size": 32, "gpus": 1, "throughput": 100.0, "unit": "img/s"}


def baseline_text(*throughputs: str, defaults: str = '{"tolerance": 0.1}') -> str:
    """A baseline whose throughputs are spelled as given (JSON text, so NaN and 1e400 can be written)."""
    cases = ",\n    ".join(json.dumps({k: v for k, v in ENTRY.items() if k != "throughput"} | {"precision": precision})
                           [:-1] + f', "throughput": {value}}}'
                           for precision, value in zip(("fp32", "amp", "bf16", "tf32"), throughputs))
    return ('{"schema_version": 1, "kind": "dlperf-baseline", "provenance": {"source": "test"},\n'
            f' "defaults": {defaults},\n "cases": [\n    {cases}\n ]}}\n')


def write(tmp_path, text, name="b.json"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def refused(path, loader=baseline.load) -> jsonio.DocumentError:
    with pytest.raises(jsonio.DocumentError) as info:
        loader(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return info.value


def test_the_helper_writes_what_it_says(tmp_path):
    loaded = baseline.load(write(tmp_path, baseline_text("100", "2.5e3")))
    assert [e.throughput for e in loaded.entries] == [100.0, 2500.0]


# --------------------------------------------------------------------------- non-finite numbers


@pytest.mark.parametrize(("spelled", "problem"), [
    ("NaN", "NaN is not allowed; expected a finite number"),
    ("Infinity", "Infinity is not allowed; expected a finite number"),
    ("-Infinity", "-Infinity is not allowed; expected a finite number"),
    ("1e400", "1e400 is too large for a float (it reads as infinity); expected a finite number"),
    ("-1.5E+309", "-1.5E+309 is too large for a float (it reads as infinity); expected a finite number"),
    ("1" + "0" * 400, "is too large for a float; expected a finite number"),
    ("7" * 5000, "(5000 characters) is too large for a float; expected a finite number"),
])
def test_a_non_finite_throughput_is_refused_naming_the_json_path(tmp_path, spelled, problem):
    path = write(tmp_path, baseline_text("100", "200", "300", spelled))
    error = refused(path)
    assert error.where == "$.cases[3].throughput"
    assert problem in error.problem


def test_non_finite_numbers_are_refused_anywhere_in_any_document(tmp_path):
    error = refused(write(tmp_path, baseline_text("100", defaults='{"tolerance": NaN}')))
    assert error.where == "$.defaults.tolerance"
    results = {"schema_version": 1, "kind": "dlperf-results", "created": "2026-01-01", "environment": {},
               "options": {}, "baseline": None, "cases": []}
    text = json.dumps(results).replace('"environment": {}', '"environment": {"host": {"memory_bytes": 1e999}}')
    error = refused(write(tmp_path, text, "r.json"), lambda p: jsonio.load(p, "results"))
    assert error.where == "$.environment.host.memory_bytes" and "1e999 is too large" in error.problem


def test_a_field_given_twice_is_refused_naming_it(tmp_path):
    text = baseline_text("100").replace('"throughput": 100', '"throughput": 1e9, "throughput": 100')
    error = refused(write(tmp_path, text))
    assert error.where == "$.cases[0].throughput"
    assert "appears twice" in error.problem
    text = baseline_text("100").replace('"test"}', '"test", "a b": 1, "a b": 2}')
    assert refused(write(tmp_path, text)).where == "$.provenance['a b']"


def test_writing_refuses_nan_and_infinity_naming_the_field(tmp_path):
    path = write(tmp_path, baseline_text("100"))
    before = path.read_bytes()
    for bad in (float("nan"), float("inf"), -float("inf")):
        document = json.loads(before)
        document["cases"][0]["throughput"] = bad
        with pytest.raises(jsonio.DocumentError) as info:
            baseline.save(path, document)
        assert info.value.where == "$.cases[0].throughput" and "expected a finite number" in info.value.problem
        with pytest.raises(jsonio.DocumentError, match=r"x.json: \$.a\[1\].b: nan is not allowed"):
            jsonio.dump(tmp_path / "x.json", {"a": [1, {"b": float("nan")}]})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


# --------------------------------------------------------------------------- unreadable text


@pytest.mark.parametrize(("content", "problem"), [
    (b"", "the file is empty; expected a JSON document"),
    (b"  \n\t\n", "the file is empty; expected a JSON document"),
    (baseline_text("100").encode().replace(b"tiny", b"t\xe9ny"),
     "not UTF-8 text: byte 0xe9 at offset "),
    (b"\xff\xfe{\x00}\x00", "not UTF-8 text: byte 0xff at offset 0 (line 1)"),
    (b"[" * 100_000 + b"]" * 100_000,
     "nested deeper than 64 levels of objects and arrays; expected a flatter document"),
    (b"[" * 500 + b"]" * 500, "nested deeper than 64 levels"),
    (b'{"a": ' * 70 + b"1" + b"}" * 70, "nested deeper than 64 levels"),
    (baseline_text("100").encode()[:-40], "not valid JSON: the document ends early at line"),
    (baseline_text("100").encode()[:60],
     "not valid JSON: a string starting at line 1 column 50 never ends (truncated?)"),
    (b'{"schema_version": 1}\n{"schema_version": 1}', "not valid JSON: Extra data at line 2 column 1"),
])
def test_unreadable_text_is_one_line_naming_the_file(tmp_path, content, problem):
    error = refused(write(tmp_path, content))
    assert error.where is None and problem in error.problem
    assert not isinstance(error, jsonio.UnreadableError)  # read, but not a document: "invalid", not "trouble"


def test_every_cut_of_a_valid_document_is_refused_cleanly(tmp_path):
    text = baseline_text("100", "200")
    for cut in range(len(text.rstrip())):
        refused(write(tmp_path, text[:cut]))


def test_a_byte_order_mark_is_ignored_and_a_deep_but_sane_document_is_read(tmp_path):
    assert len(baseline.load(write(tmp_path, "\ufeff" + baseline_text("100"))).entries) == 1
    deep = json.loads(baseline_text("100"))
    nested = {}
    for _ in range(25):  # 50 levels, and 2 more for the document and its environment
        nested = {"x": [nested]}
    deep["environment"] = nested
    assert baseline.load(write(tmp_path, json.dumps(deep))).entries[0].throughput == 100.0


def test_messages_stay_one_line_whatever_the_document_holds(tmp_path):
    document = json.loads(baseline_text("100"))
    document["cases"][0]["settings"] = {"odd\nkey\u2028\ud800": [1]}
    error = refused(write(tmp_path, json.dumps(document)))
    assert error.where == "$.cases[0].settings['odd\nkey\u2028\ud800']"
    assert "settings['odd\\nkey\\u2028\\ud800']: [1] is not of type" in str(error)
    str(error).encode("utf-8")  # printable: no lone surrogate


# --------------------------------------------------------------------------- atomic writes


def test_writing_goes_through_a_symlink_to_its_target(tmp_path):
    real = tmp_path / "store" / "b.json"
    real.parent.mkdir()
    write(real.parent, baseline_text("100"))
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(os.path.relpath(real, tmp_path))
    document = json.loads(real.read_text())
    document["cases"][0]["throughput"] = 123.0
    baseline.save(link, document)
    assert link.is_symlink() and os.readlink(link) == os.path.join("store", "b.json")
    assert baseline.load(real).entries[0].throughput == 123.0
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "store"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["b.json"]


def test_a_dangling_symlink_gets_its_target_written_and_a_loop_is_refused(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "out" / "new.json")
    jsonio.write_atomic(link, "hello\n")
    assert link.is_symlink() and (tmp_path / "out" / "new.json").read_text() == "hello\n"
    loop = tmp_path / "loop.json"
    loop.symlink_to(tmp_path / "loop2.json")
    (tmp_path / "loop2.json").symlink_to(loop)
    with pytest.raises(jsonio.OutputError, match=r"loop.json: cannot write through this symbolic link: it loops"):
        jsonio.write_atomic(loop, "x")
    assert loop.is_symlink() and (tmp_path / "loop2.json").is_symlink()


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_devices_are_refused_as_output_targets(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    with pytest.raises(jsonio.OutputError, match=rf"^{device}: is a character device, not a file; give the path"):
        jsonio.check_output(device)


def test_a_device_node_a_fifo_and_a_folder_stay_what_they_are(tmp_path):
    targets = {}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    targets[fifo] = "is a FIFO (named pipe), not a file"
    (tmp_path / "folder").mkdir()
    targets[tmp_path / "folder"] = "is a folder, not a file"
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        targets[node] = "is a character device, not a file"
    except (PermissionError, AttributeError):
        pass  # not root here: /dev/null itself is checked above
    link = tmp_path / "to-fifo"
    link.symlink_to(fifo)
    targets[link] = f"to-fifo (-> {fifo}): is a FIFO"
    document = json.loads(baseline_text("100"))
    for target, problem in targets.items():
        kind = stat.S_IFMT(os.stat(target).st_mode)
        with pytest.raises(jsonio.OutputError) as info:
            baseline.save(target, document)
        assert str(info.value).startswith(str(target)) and problem in str(info.value)
        assert stat.S_IFMT(os.stat(target).st_mode) == kind
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in targets)


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    real = tmp_path / "store" / "b.json"
    real.parent.mkdir()
    write(real.parent, baseline_text("100"))
    before = real.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(real)

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(jsonio.OutputError, match=r"link.json: cannot write: No space left on device"):
        jsonio.write_atomic(link, "new")
    monkeypatch.undo()
    assert real.read_bytes() == before and link.is_symlink()
    assert sorted(p.name for p in real.parent.iterdir()) == ["b.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "store"]


def test_only_what_the_reader_takes_back_is_written(tmp_path):
    path = write(tmp_path, baseline_text("100"))
    before = path.read_bytes()
    document = json.loads(before)
    document["cases"].append(dict(document["cases"][0]))  # the same case twice: load refuses it
    with pytest.raises(jsonio.DocumentError, match=r"b.json: \$.cases\[1\]: duplicate case tiny-fp32-bs32-gpu1"):
        baseline.save(path, document)
    document["cases"][1:] = [{**ENTRY, "model": "a/b"}]
    with pytest.raises(jsonio.DocumentError, match=r"b.json: \$.cases\[1\].model: 'a/b' does not match"):
        baseline.save(path, document)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]
