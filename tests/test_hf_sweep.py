"""`rope-ref survey --transformers`: every RoPE model family of transformers agrees with from_hf.

Each family's own rotary module and apply function (transformers' code, the independent
side) are driven from its default config and compared with `RopeSpec.from_hf` of that
config applied by rope_ref. CI pins transformers (pyproject's test-full); docs/survey.md
records the full result on that version.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rope_ref.cli import main  # noqa: E402
from rope_ref.cli.survey.transformers_sweep import families, sweep, sweep_family  # noqa: E402

#: The version CI pins; there the counts below hold exactly.
PINNED = "5.24.0"


@pytest.fixture(scope="module")
def results():
    return sweep()


def test_every_driven_family_agrees(results):
    disagree = [f"{r.model_type}: {r.detail}" for r in results if r.verdict == "disagree"]
    assert not disagree, "\n".join(disagree)
    verdicts = {"agree", "from_hf refuses", "not driven", "no RoPE", "refused"}
    assert {r.verdict for r in results} <= verdicts
    for r in results:
        assert r.detail, r  # every verdict says what was driven, or why not


#: Families whose default config from_hf cannot read yet (docs/survey.md says why).
KNOWN_REFUSALS: set[str] = set()


@pytest.mark.skipif(transformers.__version__ != PINNED, reason="counts recorded on the pin")
def test_counts_on_the_pinned_version(results):
    assert len(results) == len(families()) == 212
    assert sum(r.verdict == "agree" for r in results) == 169
    assert {r.model_type for r in results if r.verdict == "from_hf refuses"} == KNOWN_REFUSALS


def test_the_sweep_catches_a_wrong_layout(monkeypatch):
    # Planted mistake: from_hf forgets that Cohere pairs (2j, 2j + 1).
    from rope_ref._config import families as table

    assert sweep_family("cohere").verdict == "agree"
    monkeypatch.setitem(table.FAMILIES, "cohere", table.DEFAULT)
    result = sweep_family("cohere")
    assert result.verdict == "disagree"
    assert "layout" in result.detail


def test_the_sweep_catches_a_missing_output_layout(monkeypatch):
    from rope_ref._config import families as table

    monkeypatch.setitem(
        table.FAMILIES, "deepseek_v3", table.Family("planted", interleave_flag=None)
    )
    assert sweep_family("deepseek_v3").verdict == "disagree"


def test_cli_json(capsys):
    assert main(["survey", "--transformers", "llama", "mpt", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["model_type"], r["verdict"]) for r in rows] == [
        ("llama", "agree"),
        ("mpt", "no RoPE"),
    ]


def test_default_configs_have_no_unknown_keys(results):
    # The unknown-key check must stay silent on every config transformers itself builds.
    from rope_ref._config.hf_keys import check_known_keys
    from rope_ref._config.hf_reader import ConfigReader
    from rope_ref.cli.survey.transformers_sweep import _default_config, _sub_configs

    for r in results:
        if r.verdict != "agree":
            continue
        for sub in _sub_configs(_default_config(r.model_type)):
            check_known_keys(ConfigReader(sub), strict=True)
