"""The README's offline pre-fetch of a hub kernel calls transformers' own loader with the plan's attention verbatim:
`kernels.get_kernel('org/name@rev:function')` took the revision and function as part of the repository id, and
kernels 0.19 wants the version transformers picks (integrations/hub_kernels.py load_and_register_attn_kernel splits
them and chooses it)."""

from __future__ import annotations

import inspect
import re

import pytest

from advisor.bundle.generate import generate
from advisor.core.request import Request


@pytest.mark.parametrize("attn", ["kernels-community/flash-attn@v1:flash", "kernels-community/flash-attn2",
                                  "flash_attention_2"])
def test_the_prefetch_command_is_transformers_loader(tmp_path, attn):
    generate(Request(model="8B", gpu="H100-80GB", gpus=8, attn=attn), out=str(tmp_path / "b"))
    readme = (tmp_path / "b" / "README.md").read_text()
    call = re.search(r"load_and_register_attn_kernel\('([^']+)'\)", readme)
    assert call, "no pre-fetch command"
    assert call.group(1) == (attn if "/" in attn else "kernels-community/flash-attn2")
    assert "kernels.get_kernel(" not in readme
    hub_kernels = pytest.importorskip("transformers.integrations.hub_kernels")
    params = inspect.signature(hub_kernels.load_and_register_attn_kernel).parameters
    assert list(params)[0] == "attn_implementation"
