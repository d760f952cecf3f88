"""The task DAG functions on hand-built bead records."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from helix.tasks import graph as g


def bead(task_id, status="open", deps=(), priority=2, created="2026-01-01T00:00:00Z", **extra):
    record = {
        "id": task_id,
        "title": task_id.upper(),
        "status": status,
        "priority": priority,
        "created_at": created,
        "dependencies": [{"issue_id": task_id, "depends_on_id": d, "type": "blocks"} for d in deps],
    }
    record.update(extra)
    return record


def ids(tasks):
    return [t["id"] for t in tasks]


def test_ready_needs_every_dependency_released_and_orders_stably():
    tasks = [
        bead("c", priority=1, created="2026-01-03T00:00:00Z"),
        bead("b", priority=1, created="2026-01-02T00:00:00Z"),
        bead("a", priority=3),
        bead("d", deps=["a"]),
        bead("e", deps=["x-missing"]),
        bead("f", deps=["done"]),
        bead("done", status="closed"),
        bead("g", deps=["failed"]),
        bead("failed", status="closed", outcome="blocked"),
        bead("h", deps=["skipped"]),
        bead("skipped", status="closed", outcome="skipped"),
        bead("busy", status="in_progress"),
        bead("later", status="deferred"),
    ]
    assert ids(g.ready(tasks)) == ["b", "c", "f", "h", "a"]
    blocked = {b["id"]: [w["id"] for w in b["waiting_on"]] for b in g.blocked(tasks)}
    assert blocked == {"d": ["a"], "e": ["x-missing"], "g": ["failed"]}


def test_execution_ready_drops_ineligible_superseded_and_backed_off():
    now = datetime(2026, 5, 1, tzinfo=UTC)
    tasks = [
        bead("ok"),
        bead("no", **{"execution-eligible": False}),
        bead("old", **{"superseded-by": "ok"}),
        bead("wait", **{"execute-loop-retry-after": "2026-05-02T00:00:00Z"}),
        bead("again", **{"execute-loop-retry-after": "2026-04-30T00:00:00Z"}),
    ]
    assert ids(g.ready(tasks, execution=True, now=now)) == ["again", "ok"]
    assert len(g.ready(tasks)) == 5


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"a": ["b"], "b": ["c"], "c": []}, None),
        ({"a": ["a"]}, ["a", "a"]),
        ({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c", "a"]),
        ({"a": ["b"], "b": ["x"], "x": ["b"]}, ["b", "x", "b"]),
    ],
)
def test_find_cycle(graph, expected):
    assert g.find_cycle(graph) == expected


def test_detect_cycles_reports_each_loop():
    cycles = g.detect_cycles({"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"], "e": []})
    assert sorted(tuple(sorted(set(c))) for c in cycles) == [("a", "b"), ("c", "d")]


def test_deep_chain_does_not_overflow():
    graph = {f"t{i}": [f"t{i + 1}"] for i in range(5000)}
    graph["t5000"] = ["t0"]
    assert len(g.find_cycle(graph)) == 5002


def test_waves_are_layers_capped_at_six():
    tasks = [bead(f"w{i}", created=f"2026-01-01T00:00:{i:02d}Z") for i in range(8)]
    tasks += [bead("top", deps=["w0", "w7"]), bead("stuck", deps=["gone"])]
    waves = g.waves(tasks)
    assert [len(w) for w in waves] == [6, 2, 1]
    assert waves[0] == [f"w{i}" for i in range(6)]
    assert waves[2] == ["top"]
    assert all("stuck" not in w for w in waves)


def test_stall_names_the_holders():
    tasks = [
        bead("root", status="closed", outcome="blocked"),
        bead("mid", deps=["root"]),
        bead("leaf", deps=["mid"]),
        bead("other", deps=["nowhere"]),
    ]
    report = g.stall(tasks)
    assert report["stalled"] and not report["ready"]
    assert report["holders"] == [
        {"id": "nowhere", "status": "missing", "outcome": None, "holds": ["other"]},
        {"id": "root", "status": "closed", "outcome": "blocked", "holds": ["leaf", "mid"]},
    ]
    assert not g.stall([bead("a"), bead("b", deps=["a"])])["stalled"]


def test_stall_reports_a_cycle():
    report = g.stall([bead("a", deps=["b"]), bead("b", deps=["a"])])
    assert report["stalled"] and report["cycle"] in (["a", "b", "a"], ["b", "a", "b"])


@pytest.mark.parametrize(
    "record, expected",
    [
        (bead("t"), (True, False, False, "pending", False)),
        (bead("t", deps=["open-dep"]), (False, False, False, "pending", False)),
        (bead("t", status="in_progress"), (False, False, False, "in_progress", False)),
        (bead("t", status="closed"), (False, True, True, "delivered", False)),
        (bead("t", status="closed", outcome="delivered"), (False, True, True, "delivered", False)),
        (bead("t", status="closed", outcome="blocked"), (False, True, False, "blocked", True)),
        (bead("t", status="closed", outcome="partial"), (False, True, False, "partial", True)),
        (bead("t", status="closed", outcome="skipped"), (False, True, False, "skipped", False)),
    ],
)
def test_task_state(record, expected):
    by_id = {"t": record, "open-dep": bead("open-dep")}
    s = g.state(record, by_id)
    assert (
        s["executable"],
        s["finished"],
        s["successful"],
        s["outcome"],
        s["blocks_dependents"],
    ) == expected


def test_lineage_lists_what_blockers_delivered():
    tasks = [
        bead("a", status="closed", outcome="delivered", summary="Added AuthService with JWT"),
        bead("b", status="closed"),
        bead("c", status="closed", outcome="blocked", summary="no"),
        bead("t", deps=["a", "b", "c"]),
    ]
    assert g.lineage(tasks[-1], tasks) == [
        {"id": "a", "title": "A", "delivered": "Added AuthService with JWT"},
        {"id": "b", "title": "B", "delivered": "B"},
    ]


def test_malformed_dependencies_are_ignored():
    task = bead("t")
    task["dependencies"] = [
        None,
        "x",
        {"depends_on_id": 5},
        {"depends_on_id": "ok"},
        {"depends_on_id": "rel", "type": "related"},
    ]
    assert g.blockers(task) == ["ok"]
