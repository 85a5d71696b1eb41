"""The transformers floor: one number, declared everywhere, and one clear ImportError below it. (`make test-compat`
loads exported folders under the floor, the newest 5.x and versions below the floor in their own venvs.)"""

import json
import re
from pathlib import Path

import pytest

from modeling_simplified import SimplifiedForCausalLM
from modeling_simplified.configuration_simplified import MIN_TRANSFORMERS_VERSION, _require_transformers

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_declares_the_shipped_floor():
    # the requirement itself, not an extra of it (the test extra's `transformers[serving]`)
    (spec,) = re.findall(r'"(transformers(?!\[)[^"]*)"', (ROOT / "pyproject.toml").read_text())
    assert spec == f"transformers>={MIN_TRANSFORMERS_VERSION.removesuffix('.0')},<6"


@pytest.mark.parametrize("installed", ["4.57.6", "5.0.0", "5.3.0", "5.4.0.dev0"])
def test_below_the_floor_is_one_import_error_naming_both_versions(installed):
    with pytest.raises(ImportError) as info:
        _require_transformers(installed, "5.4.0")
    assert str(info.value) == (
        f"This simplified-transformers model needs transformers>=5.4.0,<6, but transformers {installed} is installed. "
        "Upgrade with: pip install 'transformers>=5.4.0,<6'"
    )


@pytest.mark.parametrize("installed", ["5.4.0", "5.4.1", "5.23.0", "5.30.0.dev0"])
def test_at_or_above_the_floor_passes(installed):
    assert _require_transformers(installed, "5.4.0") is None


def test_export_declares_the_floor_in_config_and_card(tmp_path):
    from conftest import tiny_config

    from modeling_simplified.hub_cards.export import export_model

    out = export_model(SimplifiedForCausalLM(tiny_config("sas")), tmp_path / "out")
    config = json.loads((out / "config.json").read_text())
    assert config["simplified_min_transformers_version"] == MIN_TRANSFORMERS_VERSION
    assert config["transformers_version"]  # transformers' own field (the version that wrote the folder) stays
    card = (out / "README.md").read_text()
    assert f"Requirements: `transformers>={MIN_TRANSFORMERS_VERSION},<6`" in card
    assert f"pip install 'transformers>={MIN_TRANSFORMERS_VERSION},<6' torch" in card
    shipped = (out / "configuration_simplified.py").read_text()
    assert f'MIN_TRANSFORMERS_VERSION = "{MIN_TRANSFORMERS_VERSION}"' in shipped
    # the check runs before the first v5-only import of the shipped configuration module
    first_v5_import = re.search(r"^from transformers import .*PreTrainedConfig", shipped, re.MULTILINE)
    assert first_v5_import and shipped.index("\n_require_transformers()") < first_v5_import.start()
