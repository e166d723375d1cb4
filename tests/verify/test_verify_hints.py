"""verify's hints name what helps the case at hand: a plan that offloads nothing is not told to offload less, and a
folder that is not a bundle is told how to name one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from advisor.core.errors import AdvisorError
from advisor.verify import folder, preflight

GIB = 1 << 30


def _host(available_gib: float):
    return SimpleNamespace(host=SimpleNamespace(ram_available_bytes=int(available_gib * GIB),
                                                locked_memory_limit_bytes=None))


@pytest.mark.parametrize("offload", [False, True])
def test_short_host_ram_hint_follows_the_plan(offload):
    pf = preflight.Preflight()
    preflight.check_host(pf, _host(22), host_bytes=47 * GIB, pinned_bytes=0, offload=offload)
    assert pf.problems and len(pf.hints) == 1
    assert ("offloads less" in pf.hints[0]) is offload
    if not offload:
        assert "at least 52.2 GiB" in pf.hints[0]


def test_a_folder_that_is_not_a_bundle_is_told_how_to_name_one(tmp_path):
    with pytest.raises(AdvisorError) as err:
        folder._load_bundle(str(tmp_path))
    assert "trl-advisor verify generated/NAME" in err.value.hint and "current folder" in err.value.hint
