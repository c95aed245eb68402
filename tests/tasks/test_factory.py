"""`load_factory`: a `module:callable` reference imported, or one line saying what is wrong."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from corpus_assets.core.errors import EXIT_USAGE, ConfigError
from corpus_assets.tasks.config import load_job_config
from corpus_assets.tasks.factory import load_factory, split_ref
from corpus_assets.tasks.types import Recipe


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path with a good recipe module and broken ones."""
    pkg = tmp_path / "probe_recipes"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text(
        textwrap.dedent(
            """
            class Factory:
                @staticmethod
                def create(**params):
                    return ("made", params)

            def create_recipe(**params):
                return params

            NOT_CALLABLE = 3
            """
        )
    )
    (pkg / "raises.py").write_text("raise RuntimeError('boom\\nsecond line')\n")
    (pkg / "needs.py").write_text("import probe_missing_dependency_xyz\n")
    (pkg / "syntax.py").write_text("def f(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg


def _error(ref: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_factory(ref)
    assert info.value.exit_code == EXIT_USAGE
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_real_callable_is_returned(modules: Path) -> None:
    assert load_factory("json:dumps") is json.dumps
    factory = load_factory("probe_recipes.good:create_recipe")
    assert factory(candidate_count=3) == {"candidate_count": 3}
    assert load_factory("probe_recipes.good:Factory.create")(a=1) == ("made", {"a": 1})


def test_a_missing_module_is_named(modules: Path) -> None:
    assert _error("probe_recipes.nothere:f") == (
        "module 'probe_recipes.nothere' not found (from 'probe_recipes.nothere:f')"
    )
    assert _error("no_such_top_level_pkg.sub:f") == (
        "module 'no_such_top_level_pkg' not found (from 'no_such_top_level_pkg.sub:f')"
    )


def test_a_module_that_fails_to_import_says_why(modules: Path) -> None:
    assert _error("probe_recipes.needs:f") == (
        "importing 'probe_recipes.needs' failed (from 'probe_recipes.needs:f'): "
        "No module named 'probe_missing_dependency_xyz'"
    )
    assert _error("probe_recipes.raises:f") == (
        "importing 'probe_recipes.raises' failed (from 'probe_recipes.raises:f'): "
        "RuntimeError: boom second line"
    )
    assert "SyntaxError" in _error("probe_recipes.syntax:f")


def test_a_missing_attribute_names_what_is_there(modules: Path) -> None:
    assert _error("probe_recipes.good:create") == (
        "'probe_recipes.good' has no attribute 'create' (from 'probe_recipes.good:create'); "
        "callables there: Factory, create_recipe"
    )
    assert "'probe_recipes.good.Factory' has no attribute 'make'" in _error(
        "probe_recipes.good:Factory.make"
    )


def test_something_not_callable_is_refused(modules: Path) -> None:
    assert _error("probe_recipes.good:NOT_CALLABLE") == (
        "'probe_recipes.good:NOT_CALLABLE' is a int, not a callable"
    )
    assert _error("os:path") == "'os:path' is a module, not a callable"


@pytest.mark.parametrize("bad", ["json", "json:", ":dumps", "json:dumps:x", "json.:dumps", "j-s:f"])
def test_a_malformed_reference_is_refused_before_importing(bad: str) -> None:
    message = _error(bad)
    assert f"{bad!r} is not a 'module:callable' reference" in message
    with pytest.raises(ValueError, match="module:callable"):
        split_ref(bad)


def test_split_ref_refuses_non_strings() -> None:
    with pytest.raises(ValueError, match="must be a 'module:callable' string, got int"):
        split_ref(3)
    assert split_ref("a.b:c.d") == ("a.b", "c.d")


def test_the_example_job_builds_the_arithmetic_recipe() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "arithmetic.yaml"
    cfg = load_job_config(example)
    assert cfg.model.recipe == "corpus_assets.recipes.arithmetic:create_recipe"
    assert cfg.partition_key == f"arithmetic-{cfg.hash12}"
    recipe = load_factory(cfg.model.recipe)(**cfg.model.params)
    assert isinstance(recipe, Recipe)
