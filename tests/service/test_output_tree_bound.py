"""An exported output tree holds at most `ipc.MAX_TREE_NODES` nodes: the candidate's encoder refuses
more (the solution's error), and the orchestrator's parse of a candidate's export refuses a tree that
passed the encoder some other way (a protocol violation: the run is a crash), so the judge never reads it."""

from __future__ import annotations

import pytest

from drkernel.gym.ipc import MAX_TREE_NODES, ProtocolViolation, encode_tree
from drkernel.gym.messages import parse_candidate


def test_the_encoder_refuses_a_tree_of_more_scalars_than_the_bound():
    tree, _ = encode_tree([0.5] * (MAX_TREE_NODES - 1))  # the list and its floats: exactly the bound
    assert len(tree["items"]) == MAX_TREE_NODES - 1
    with pytest.raises(TypeError, match="Python numbers"):
        encode_tree([0.5] * MAX_TREE_NODES)


def test_the_orchestrator_refuses_an_export_past_the_bound_nested_or_flat():
    flat = {"k": "list", "items": [{"k": "scalar", "value": 1.0}] * MAX_TREE_NODES}
    nested = {"k": "tuple", "items": [{"k": "list", "items": [{"k": "scalar", "value": 1}] * 256}] * 256}
    for tree in (flat, nested):
        with pytest.raises(ProtocolViolation, match="nodes"):
            parse_candidate({"op": "outputs", "trial": 0, "tree": tree})
        with pytest.raises(ProtocolViolation, match="nodes"):
            parse_candidate({"op": "compare", "trial": 0, "tag": "t", "tree": tree})
    small = {"k": "list", "items": [{"k": "scalar", "value": 1.0}] * 10}
    assert parse_candidate({"op": "outputs", "trial": 0, "tree": small}).tree == small
