import pytest

from pytest_dlperf.cases import (Case, OptionError, check_settings, matrix, parse_ints, parse_list, parse_precisions,
                                 parse_settings)


def test_id_reads_like_the_seed_logs():
    assert Case.make("resnet50", "amp", 256, 8).id == "resnet50-amp-bs256-gpu8"


def test_explicit_settings_are_part_of_the_id_and_sorted():
    case = Case.make("bert-base", "amp", 64, 1, {"seq_len": 512, "data": "synthetic"})
    assert case.id == "bert-base-amp-bs64-gpu1-synthetic-seq512"
    assert Case.make("x", "fp32", 1, 1, {"channels_last": False, "foo": 3}).id == "x-fp32-bs1-gpu1-nchw-foo=3"
    assert Case.make("x", "fp32", 1, 1, {"compile": True}).id == "x-fp32-bs1-gpu1-compile"
    assert Case.make("x", "fp32", 1, 1, {"compile": False}).id == "x-fp32-bs1-gpu1-eager"


def test_markers():
    assert Case.make("vgg16", "bf16", 32, 4).markers == ["dlperf", "gpu4", "bf16", "vgg16"]


def test_dict_round_trip_and_equality():
    case = Case.make("tiny", "fp32", 32, 2, {"image_size": 64})
    assert Case.from_dict(case.to_dict()) == case
    assert Case.from_dict({"model": "tiny", "precision": "fp32", "batch_size": 32}).gpus == 1


def test_same_config_ignores_gpu_count_only():
    one = Case.make("tiny", "fp32", 32, 1)
    assert one.same_config(Case.make("tiny", "fp32", 32, 8))
    assert not one.same_config(Case.make("tiny", "amp", 32, 8))


def test_lists_accept_commas_spaces_and_repeats():
    assert parse_list("--x", ["a,b", "c d"]) == ["a", "b", "c", "d"]
    assert parse_list("--x", None) == []
    assert parse_ints("--n", "1,8 ,16") == [1, 8, 16]


@pytest.mark.parametrize(("raw", "message"), [
    ("0", "--dlperf-batch-size: 0 is not allowed; expected an integer >= 1"),
    ("-1", "--dlperf-batch-size: -1 is not allowed"),
    ("eight", "--dlperf-batch-size: 'eight' is not an integer"),
])
def test_bad_integers(raw, message):
    with pytest.raises(OptionError, match=message):
        parse_ints("--dlperf-batch-size", raw)


def test_unknown_precision_lists_the_known_ones():
    with pytest.raises(OptionError, match="unknown precision 'fp8'; expected one of fp32, tf32, amp, bf16"):
        parse_precisions("--dlperf-precision", "amp,fp8")


def test_matrix_defaults():
    cases = matrix(["tiny", "resnet50"], [], [], [], {"tiny": 32, "resnet50": 256}.get)
    assert [c.id for c in cases] == ["tiny-fp32-bs32-gpu1", "resnet50-fp32-bs256-gpu1"]
    cases = matrix(["tiny"], ["amp", "fp32"], [8], [1, 2], lambda m: 32)
    assert [c.id for c in cases] == ["tiny-amp-bs8-gpu1", "tiny-amp-bs8-gpu2", "tiny-fp32-bs8-gpu1",
                                     "tiny-fp32-bs8-gpu2"]
    assert matrix([], ["amp"], [8], [1], lambda m: 32) == []


def test_settings_parts_and_the_one_gpu_twin():
    case = Case.make("my-gpu-net", "amp", 64, 8, {"image_size": 160})
    assert case.settings_parts == ["img160"]
    assert case.with_gpus(1) == Case.make("my-gpu-net", "amp", 64, 1, {"image_size": 160})


def test_settings_values_read_as_json_when_they_can():
    assert parse_settings("--dlperf-set", ["seq_len=512", "compile=true,data=dali", "lr=0.5"]) == {
        "seq_len": 512, "compile": True, "data": "dali", "lr": 0.5}
    with pytest.raises(OptionError, match="'x=' is not KEY=VALUE"):
        parse_settings("--dlperf-set", "x=")
    with pytest.raises(OptionError, match="must be a string, a number or true/false"):
        parse_settings("--dlperf-set", "x=[1]")


def test_settings_are_checked_against_the_model():
    check_settings({"image_size": 64, "data": "torchvision", "compile": False}, {"image_size": 224}, "here")
    with pytest.raises(ValueError, match=r"here.depth: unknown setting 'depth'; this model takes channels_last, "
                                         r"compile, compile_mode, data, image_size"):
        check_settings({"depth": 3}, {"image_size": 224}, "here")


def test_settings_equal_to_the_models_defaults_are_not_part_of_the_case():
    case = Case.make("bert-base", "amp", 64, 8, {"seq_len": 128, "compile": True})
    plain = case.without_defaults({"seq_len": 128, "hidden_size": 768})
    assert plain == Case.make("bert-base", "amp", 64, 8, {"compile": True})
    assert plain.id == "bert-base-amp-bs64-gpu8-compile"
    assert case.without_defaults({"seq_len": 512}) == case


@pytest.mark.parametrize(("parse", "option", "raw", "expected"), [
    (parse_list, "--dlperf-model", ["tiny,tiny", "resnet50 tiny"], ["tiny", "resnet50"]),
    (parse_ints, "--dlperf-gpus", "2,2,1,02", [2, 1]),
    (parse_precisions, "--dlperf-precision", ["fp32,fp32", "amp"], ["fp32", "amp"]),
])
def test_repeated_matrix_values_are_dropped_in_first_seen_order(parse, option, raw, expected):
    assert parse(option, raw) == expected


def test_a_value_listed_twice_makes_one_case():
    cases = matrix(["tiny", "tiny"], ["fp32", "fp32"], ["max", "max", 8], [2, 2], lambda m: 32)
    assert [c.id for c in cases] == ["tiny-fp32-bsmax-gpu2", "tiny-fp32-bs8-gpu2"]


@pytest.mark.parametrize(("raw", "message"), [
    ([""], "--dlperf-model: expected one or more model names, got ''"),
    ("", "--dlperf-model: expected one or more model names, got ''"),
    ([" , "], "--dlperf-model: expected one or more model names, got ' , '"),
    (["tiny", ""], "--dlperf-model: expected one or more model names, got ''"),
    (["tiny,,resnet50"],
     "--dlperf-model: 'tiny,,resnet50' has an empty item; expected model names separated by commas"),
    (["tiny,"], "--dlperf-model: 'tiny,' has an empty item"),
    ([], "--dlperf-model: expected one or more model names"),
])
def test_an_empty_model_list_is_an_error_not_no_cases(raw, message):
    with pytest.raises(OptionError) as info:
        parse_list("--dlperf-model", raw)
    assert str(info.value).startswith(message)


def test_other_empty_lists_say_what_they_list():
    with pytest.raises(OptionError, match=r"^--dlperf-gpus: expected one or more GPU counts \(integers >= 1\), got ''"):
        parse_ints("--dlperf-gpus", [""])
    with pytest.raises(OptionError, match=r"^--dlperf-precision: expected one or more precisions \(fp32, tf32"):
        parse_precisions("--dlperf-precision", ",")
    assert parse_list("--dlperf-model", None) == []  # not given: no matrix cases, as before


@pytest.mark.parametrize(("raw", "message"), [
    ("image_size=1e400", "--dlperf-set: 'image_size=1e400': 1e400 is not a finite number; expected a finite number"),
    ("image_size=-1e400", "--dlperf-set: 'image_size=-1e400': -1e400 is not a finite number"),
    ("lr=NaN", "--dlperf-set: 'lr=NaN': NaN is not a finite number"),
    ("lr=Infinity", "--dlperf-set: 'lr=Infinity': Infinity is not a finite number"),
    ("lr=-Infinity", "--dlperf-set: 'lr=-Infinity': -Infinity is not a finite number"),
    ("seq_len=1" + "0" * 400, "is too large for a float; expected a finite number"),
    ("seq_len=" + "9" * 5000, "(5000 digits) is too large for a float"),
])
def test_settings_values_must_be_finite_numbers(raw, message):
    with pytest.raises(OptionError) as info:
        parse_settings("--dlperf-set", raw)
    assert message in str(info.value) and str(info.value).startswith("--dlperf-set: ")


def test_settings_that_only_look_like_numbers_stay_strings():
    assert parse_settings("--dlperf-set", "a=nan,b=inf,c=1e308") == {"a": "nan", "b": "inf", "c": 1e308}
    with pytest.raises(OptionError, match="the value must be a string, a number or true/false"):
        parse_settings("--dlperf-set", "d=" + "[" * 3000)  # a list, nested past the recursion limit
