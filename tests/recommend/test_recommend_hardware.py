"""Which hardware recommend plans for: supported GPU types (plan-only ones when named), counts 1-2-4-8 then whole
nodes of 8, consumer cards on one node over PCIe without peer-to-peer."""

from __future__ import annotations

import pytest

from advisor.catalog import all_gpus, resolve_gpu
from advisor.core.errors import AdvisorError
from advisor.recommend.hardware import MAX_GPUS_LIMIT, check_limits, counts, gpu_types


def _shape(hw_list):
    return [(h.gpus_per_node, h.nodes) for h in hw_list]


def test_counts_fill_one_node_then_add_whole_nodes_of_eight():
    h100 = resolve_gpu("H100-80GB")
    assert _shape(counts(h100, 16, 8)) == [(1, 1), (2, 1), (4, 1), (8, 1), (8, 2)]
    assert _shape(counts(h100, 64, 4)) == [(1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (8, 4)]
    assert _shape(counts(h100, 12, 8)) == [(1, 1), (2, 1), (4, 1), (8, 1)]
    assert _shape(counts(h100, 1, 8)) == [(1, 1)]


def test_the_largest_limit_stays_a_short_list():
    assert len(counts(resolve_gpu("H100-80GB"), MAX_GPUS_LIMIT, 512)) == 13  # 1, 2, 4, 8, then 2..512 nodes


def test_consumer_cards_stay_on_one_node_without_peer_to_peer():
    rtx = resolve_gpu("RTX-4090")
    assert rtx.consumer
    choices = counts(rtx, 64, 8)
    assert _shape(choices) == [(1, 1), (2, 1), (4, 1), (8, 1)]
    assert choices[-1].target().intra_node_link == "pcie-nop2p"
    assert counts(resolve_gpu("H100-80GB"), 8, 1)[-1].target().intra_node_link == "nvlink"


def test_plan_only_gpus_are_left_out_unless_named():
    default = gpu_types(None)
    assert all(g.supported for g in default)
    assert {g.id for g in all_gpus() if g.supported} == {g.id for g in default}
    assert "MI300X" not in {g.id for g in default}
    assert [g.id for g in gpu_types(["MI300X"])] == ["MI300X"]


def test_named_types_resolve_aliases_once_each_in_order():
    assert [g.id for g in gpu_types(["h100", "A100-80GB", "H100-SXM"])] == ["H100-80GB", "A100-80GB"]
    with pytest.raises(AdvisorError, match="unknown GPU"):
        gpu_types(["H10"])
    with pytest.raises(AdvisorError, match="empty"):
        gpu_types(["H100", ""])


@pytest.mark.parametrize("max_gpus, max_nodes", [(0, 8), (64, 0), (MAX_GPUS_LIMIT + 1, 8), (64, 513), (True, 8)])
def test_limits_outside_their_range_are_usage_errors(max_gpus, max_nodes):
    with pytest.raises(AdvisorError):
        check_limits(max_gpus, max_nodes)


@pytest.mark.parametrize("max_gpus, max_nodes, hint", [(0, 8, "use at least --max-gpus 1"),
                                                        (64, 0, "use at least --max-nodes 1"),
                                                        (MAX_GPUS_LIMIT + 1, 8, f"use at most --max-gpus {MAX_GPUS_LIMIT}")])
def test_the_hint_points_the_way_back_into_the_range(max_gpus, max_nodes, hint):
    with pytest.raises(AdvisorError) as err:
        check_limits(max_gpus, max_nodes)
    assert err.value.hint == hint
