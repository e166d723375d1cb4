"""A GPU family named without its memory size (`--gpu V100`) lists every catalogue row it could mean."""

from __future__ import annotations

import pytest

from advisor.catalog import resolve_gpu
from advisor.cli import main as cli_main
from advisor.core.errors import UnknownNameError


@pytest.mark.parametrize("name", ["V100", "v100", " V100 "])
def test_a_family_name_lists_every_memory_size(name):
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu(name)
    assert info.value.message == f"GPU '{name.strip()}' is ambiguous: V100-16GB (16 GiB), V100-32GB (32 GiB)"
    assert info.value.hint == "pass one of them: --gpu V100-16GB or --gpu V100-32GB"


def test_names_that_mean_one_row_still_resolve():
    assert resolve_gpu("V100-16GB").id == "V100-16GB"
    assert resolve_gpu("A100").id == "A100-80GB"  # an alias the catalogue gives its row
    assert resolve_gpu("H200").id == "H200"


def test_an_unknown_name_still_gets_suggestions():
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu("H1OO")
    assert "ambiguous" not in info.value.message


def test_the_cli_says_so_in_one_error_line_and_a_hint(capsys):
    assert cli_main(["estimate", "--model", "7B", "--gpu", "V100"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["error: GPU 'V100' is ambiguous: V100-16GB (16 GiB), V100-32GB (32 GiB)",
                   "hint: pass one of them: --gpu V100-16GB or --gpu V100-32GB"]
