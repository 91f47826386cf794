"""The test kit's Redis Cluster rig: real nodes, failovers, slot moves, nothing left behind."""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

import pytest

from redisbeat_testkit import cluster
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.cluster_process import free_ports
from redisbeat_testkit.cluster_view import SLOTS


def a_key_on_every_master(rig: ClusterRig) -> dict[int, str]:
    """One key per master, told apart by their hash tags: {master port: key}."""
    found: dict[int, str] = {}
    for i in itertools.count():
        key = f"{{tag{i}}}:key"
        found.setdefault(rig.node_for_key(key), key)
        if len(found) == len(rig.masters()):
            return found
    raise AssertionError("unreachable")


def test_three_masters_serve_every_slot_and_keys_with_different_tags_land_on_each(
    tmp_path: Path,
):
    with ClusterRig(parent=tmp_path) as rig:
        assert len(rig.masters()) == 3
        assert rig.replicas() == []
        for node in rig.nodes:
            info = node.info()
            assert info["cluster_state"] == "ok"
            assert info["cluster_slots_assigned"] == str(SLOTS)
        assert rig.url == "redis-cluster://" + ",".join(f"127.0.0.1:{p}" for _, p in rig.seeds)

        client = rig.client()
        keys = a_key_on_every_master(rig)
        for key in keys.values():
            client.set(key, f"value of {key}")

        assert set(keys) == set(rig.masters())
        for master, key in keys.items():
            assert rig.node_client(master).get(key) == f"value of {key}"
            assert client.get(key) == f"value of {key}"


def test_a_failover_promotes_the_replica_and_the_client_reads_its_keys_back(tmp_path: Path):
    with ClusterRig(replicas_per_master=1, parent=tmp_path) as rig:
        assert len(rig.masters()) == 3
        assert len(rig.replicas()) == 3
        client = rig.client()
        keys = a_key_on_every_master(rig)
        for key in keys.values():
            client.set(key, f"value of {key}")
        old, key = next(iter(keys.items()))

        new = rig.failover(old)

        assert new != old
        assert rig.node_for_key(key) == new
        assert old in rig.replicas()
        for key in keys.values():
            assert client.get(key) == f"value of {key}"
        client.set(key, "written after the failover")
        assert client.get(key) == "written after the failover"


def test_a_killed_master_is_replaced_by_its_replica_with_the_writes_it_waited_for(
    tmp_path: Path,
):
    with ClusterRig(replicas_per_master=1, parent=tmp_path) as rig:
        key = "{killed}:key"
        master = rig.node_for_key(key)
        client = rig.client()
        writer = rig.node_client(master)
        writer.set(key, "kept")
        assert writer.wait(1, 5000) == 1
        assert client.get(key) == "kept"

        new = rig.kill_master_and_wait_promotion(master)

        assert new != master
        assert master not in rig.masters() + rig.replicas()
        assert rig.node_for_key(key) == new
        assert client.get(key) == "kept"

        rig.restart(master)
        assert master in rig.replicas()
        assert client.get(key) == "kept"


def test_a_migrated_slot_takes_its_keys_along_and_the_client_follows_the_move(tmp_path: Path):
    with ClusterRig(parent=tmp_path) as rig:
        client = rig.client()
        # More keys than one MIGRATE batch.
        keys = [f"{{moved}}:{i}" for i in range(250)]
        client.mset({key: key for key in keys})
        slot = rig.slot_of(keys[0])
        source = rig.node_for_key(keys[0])
        target = next(p for p in rig.masters() if p != source)

        rig.migrate_slot(slot, target)

        assert rig.node_for_key(keys[0]) == target
        assert rig.node_client(target).exists(*keys) == len(keys)
        assert [client.get(key) for key in keys] == keys


def test_a_half_migrated_slot_answers_every_key_through_ask(tmp_path: Path):
    with ClusterRig(parent=tmp_path) as rig:
        client = rig.client()
        keys = [f"{{asked}}:{i}" for i in range(20)]
        client.mset({key: key for key in keys})
        slot = rig.slot_of(keys[0])
        source = rig.node_for_key(keys[0])
        target = next(p for p in rig.masters() if p != source)

        assert rig.begin_migration(slot, target) == source
        assert rig.migrate_keys(slot, target, count=10) == 10

        assert rig.node_for_key(keys[0]) == source
        assert [client.get(key) for key in keys] == keys
        with pytest.raises(ValueError, match="keys left"):
            rig.end_migration(slot, target)
        assert rig.migrate_keys(slot, target) == 10
        rig.end_migration(slot, target)
        assert rig.node_for_key(keys[0]) == target
        assert [client.get(key) for key in keys] == keys


def test_stop_leaves_no_process_and_no_directory_behind(tmp_path: Path):
    rig = ClusterRig(replicas_per_master=1, parent=tmp_path).start()
    pids, directory = rig.pids, rig.directory
    assert rig.client().ping()

    rig.stop()
    rig.stop()

    assert len(pids) == 6
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert directory is not None
    assert not directory.exists()


def test_a_port_taken_before_a_node_binds_it_makes_the_rig_start_again_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        calls: list[int] = []

        def first_one_taken(count: int) -> list[int]:
            ports = free_ports(count)
            calls.append(count)
            return [taken, *ports[1:]] if len(calls) == 1 else ports

        monkeypatch.setattr(cluster, "free_ports", first_one_taken)
        with ClusterRig(parent=tmp_path) as rig:
            assert len(calls) == 2
            assert taken not in [node.port for node in rig.nodes]
            assert len(rig.masters()) == 3
