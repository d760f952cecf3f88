"""The dashboard's Tasks pages: the DAG layout (layers, no overlap, cycles
tolerated), the service's views on both engines (status classes and counts as
``helix tasks status`` gives them, each task's attempts as ``helix history``
lists them, settlements and tampering), then the pages over HTTP and in
headless Chromium on a demo store, their figures checked against the CLI's JSON."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from stores import store_of, tracker_of, withholding_off
from uibrowser import (  # noqa: F401
    UiServer,
    browser_fixture,
    demo_project_fixture,
    helix_json,
    http_session,
    login,
    screenshot,
)

from helix.config import Paths
from helix.errors import NotFound
from helix.loop import injection, ledger, outcomes
from helix.memory.embeddings import HashEmbedder
from helix.service import taskgraph
from helix.service.actions import Service
from helix.ui import graph

DELIVERED = "DELIVERED: done\n"


# --- the layout ---------------------------------------------------------------------


def random_dag(seed: int, size: int) -> tuple[list[str], list[tuple[str, str]]]:
    rng = random.Random(seed)
    nodes = [f"t{i}" for i in range(size)]
    edges = []
    for j in range(1, size):
        for i in rng.sample(range(j), min(j, rng.randint(0, 3))):
            edges.append((nodes[i], nodes[j]))  # i before j: acyclic
    rng.shuffle(nodes)
    return nodes, edges


def overlaps(a: graph.Placed, b: graph.Placed) -> bool:
    return (
        a.x < b.x + graph.NODE_W
        and b.x < a.x + graph.NODE_W
        and a.y < b.y + graph.NODE_H
        and b.y < a.y + graph.NODE_H
    )


@pytest.mark.parametrize("seed", range(12))
def test_a_dag_is_layered_downwards_without_overlap(seed: int) -> None:
    nodes, edges = random_dag(seed, 5 + 7 * seed)
    laid = graph.layout(nodes, edges)
    places = laid.places
    assert set(places) == set(nodes) and not laid.back_edges
    for src, dst in edges:  # every dependency sits in a lower layer, drawn above
        assert places[src].layer < places[dst].layer
        assert places[src].y + graph.NODE_H < places[dst].y
    for node in nodes:  # longest path: one layer below the deepest dependency
        deps = [places[s].layer for s, d in edges if d == node]
        assert places[node].layer == (1 + max(deps) if deps else 0)
    boxes = list(places.values())
    for i, a in enumerate(boxes):
        assert 0 <= a.x and a.x + graph.NODE_W <= laid.width
        assert 0 <= a.y and a.y + graph.NODE_H <= laid.height
        for b in boxes[i + 1 :]:
            assert not overlaps(a, b)


def test_a_wide_layer_wraps_and_a_cycle_is_tolerated() -> None:
    wide = [f"w{i}" for i in range(40)]
    laid = graph.layout(wide, [])
    assert {p.layer for p in laid.places.values()} == {0}
    assert laid.width <= 2 * graph.PAD + graph.PER_ROW * (graph.NODE_W + graph.GAP_X)
    assert len({p.y for p in laid.places.values()}) == 40 // graph.PER_ROW + 1
    ring = ["a", "b", "c", "d"]
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "d")]
    laid = graph.layout(ring, edges)
    assert set(laid.places) == set(ring) and laid.back_edges
    assert ("d", "d") in laid.back_edges
    kept = [e for e in edges if e not in laid.back_edges]
    for src, dst in kept:
        assert laid.places[src].layer < laid.places[dst].layer


def test_barycenter_ordering_uncrosses_two_chains() -> None:
    # given crossed (a1 over b2's column), the sweeps put each child under its parent
    nodes = ["a", "b", "b1", "a1"]
    laid = graph.layout(nodes, [("a", "a1"), ("b", "b1")])
    p = laid.places
    assert (p["a"].x < p["b"].x) == (p["a1"].x < p["b1"].x)


def test_the_drawing_links_each_node_and_escapes_titles() -> None:
    nodes = [
        {"id": "hx-1", "title": "<b>first</b> & a very long title indeed to cut", "class": "ready"},
        {"id": "hx-2", "title": "second", "class": "closed"},
    ]
    svg = str(graph.draw(nodes, [("hx-1", "hx-2")], "/task/"))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert '<a class="node ready" href="/task/hx-1"' in svg
    assert '<a class="node closed" href="/task/hx-2"' in svg
    assert "<b>" not in svg and "&lt;b&gt;first" in svg and "…" in svg
    assert svg.count('<path class="edge"') == 1 and "<title>hx-1: " in svg
    assert "style=" not in svg  # the CSP allows no inline style


# --- the service, on both engines -------------------------------------------------------


@pytest.fixture
def service(tmp_path: Path, engine) -> Service:
    """A project on the engine under test: every test using it runs once per engine."""
    home = tmp_path / "proj" / ".helix"
    home.mkdir(parents=True)
    withholding_off(store_of(home))  # an attempt's page lists all it was dealt
    return Service(Paths(home=home, db=store_of(home)), embedder=HashEmbedder(), route="ui")


def inject(svc: Service, task_id: str) -> str:
    task = tracker_of(svc.paths.home).get(task_id)
    with svc.memory() as mem:
        started = injection.batch_inject(
            mem,
            [injection.task_objective(task)],
            [task_id],
            3,
            project=svc.paths.project,
            judges=[injection.task_judge(task)],
        )
    return str(started["results"][0]["attempt"])


def settle(svc: Service, task_id: str) -> dict[str, Any]:
    (svc.paths.project / f"{task_id}.txt").write_text("work\n")  # work was done
    with svc.memory() as mem:
        return dict(
            outcomes.finish(mem, tracker_of(svc.paths.home), task_id, DELIVERED, svc.paths.home)
        )


def graph_of_four(svc: Service) -> dict[str, str]:
    """base (delivered) <- next (ready); broken (failed) <- held (blocked); one in progress."""
    with svc.memory() as mem:
        mem.store("When parsing invoices, round money in decimal because floats drift")
    tracker = tracker_of(svc.paths.home)
    ids = {}
    ids["base"] = tracker.create("Round invoice money", verify="true")["id"]
    ids["broken"] = tracker.create("Parse invoice dates", verify="false")["id"]
    ids["next"] = tracker.create("Total the invoice", verify="true", deps=[ids["base"]])["id"]
    ids["held"] = tracker.create("Print the invoice", verify="true", deps=[ids["broken"]])["id"]
    ids["busy"] = tracker.create("Mail the invoice", verify="true")["id"]
    inject(svc, ids["base"])
    settle(svc, ids["base"])
    inject(svc, ids["broken"])
    settle(svc, ids["broken"])
    tracker.close(ids["broken"], "blocked", "could not")
    tracker.claim(ids["busy"], "someone")
    return ids


def test_the_overview_classes_counts_and_ledger(service: Service) -> None:
    ids = graph_of_four(service)
    view = taskgraph.overview(service)
    classes = {n["id"]: n["class"] for n in view["nodes"]}
    assert classes == {
        ids["base"]: "closed",
        ids["broken"]: "failed",
        ids["next"]: "ready",
        ids["held"]: "blocked",
        ids["busy"]: "progress",
    }
    assert set(view["edges"]) == {(ids["base"], ids["next"]), (ids["broken"], ids["held"])}
    counts = view["counts"]
    assert counts["total"] == 5 and counts["ready"] == 1 and counts["blocked"] == 1
    assert counts["by_status"]["closed"] == 2 and counts["by_status"]["in_progress"] == 1
    nodes = {n["id"]: n for n in view["nodes"]}
    assert nodes[ids["base"]]["attempts"] == 1 and nodes[ids["base"]]["last_outcome"] == "delivered"
    assert nodes[ids["base"]]["last_verified"] is True
    assert nodes[ids["broken"]]["last_outcome"] == "blocked"
    assert nodes[ids["next"]]["attempts"] == 0 and nodes[ids["next"]]["last_outcome"] is None
    # open and running tasks are drawn first
    assert [n["class"] for n in view["nodes"][:3]].count("closed") == 0


def test_the_drawing_is_bounded(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = graph_of_four(service)
    monkeypatch.setattr(taskgraph, "MAX_DRAWN", 3)
    view = taskgraph.overview(service)
    assert len(view["nodes"]) == 3 and view["not_drawn"] == 2 and view["counts"]["total"] == 5
    drawn = {n["id"] for n in view["nodes"]}
    assert drawn == {ids["next"], ids["held"], ids["busy"]}
    assert view["outside_edges"] == 2 and view["edges"] == []


def test_a_task_page_lists_attempts_as_helix_history_does(service: Service) -> None:
    ids = graph_of_four(service)
    inject(service, ids["next"])
    first = settle(service, ids["next"])
    assert first["verified"] is True
    view = taskgraph.detail(service, ids["base"])
    with service.memory() as mem:
        expected = [ledger.describe(a) for a in ledger.attempts(mem, ids["base"], 20)]
    assert view["history"] == expected == service.attempts(ids["base"])
    assert view["task"]["title"] == "Round invoice money" and view["class"] == "closed"
    (attempt,) = view["attempts"]
    assert set(attempt["scores"]) == set(attempt["injected"]) and attempt["injected"]
    (row,) = view["settlements"]
    assert row["attempt"] == attempt["attempt"] and row["verify_exit"] == 0
    assert row["outcome"] == "delivered" and view["verified_passes"] == 1
    failed = taskgraph.detail(service, ids["broken"])
    assert failed["class"] == "failed" and failed["history"][0]["verify_exit"] == 1
    waiting = taskgraph.detail(service, ids["held"])
    assert waiting["class"] == "blocked" and waiting["attempts"] == []
    assert waiting["deps"] == [ids["broken"]]


def test_tampering_is_counted_on_the_task(service: Service) -> None:
    tracker = tracker_of(service.paths.home)
    task_id = tracker.create("Loosen nothing", verify="false")["id"]
    inject(service, task_id)
    tracker.update(task_id, verify="true")  # the builder's shell changes the task's judge
    settle(service, task_id)
    view = taskgraph.detail(service, task_id)
    assert view["tampered"] == 1 and view["history"][0]["tampered"]
    assert view["settlements"][0]["tampered"]
    node = next(n for n in taskgraph.overview(service)["nodes"] if n["id"] == task_id)
    assert node["tampered"] == 1


def test_unknown_tasks_and_ledger_only_tasks(service: Service) -> None:
    with pytest.raises(NotFound):
        taskgraph.detail(service, "hx-00000000")
    with service.memory() as mem:
        mem.store("When parsing invoices, round money in decimal because floats drift")
        injection.batch_inject(
            mem, ["round the invoice money"], ["hx-untracked"], 3, project=service.paths.project
        )
    view = taskgraph.detail(service, "hx-untracked")
    assert view["task"] is None and len(view["history"]) == 1 and view["class"] == "other"


def test_an_empty_project_has_an_empty_graph(service: Service) -> None:
    view = taskgraph.overview(service)
    assert view["nodes"] == [] and view["counts"]["total"] == 0 and view["cycle"] is None


# --- the pages, on the demo store -------------------------------------------------------


def figure(body: str, name: str) -> str:
    found = re.search(rf'data-figure="{name}">([^<]*)<', body)
    assert found, name
    return found.group(1).strip()


@pytest.fixture(scope="module")
def server(demo_project: Path):
    with UiServer(demo_project) as running:
        yield running


def test_the_tasks_page_agrees_with_helix_tasks_status(
    server: UiServer, demo_project: Path
) -> None:
    status = helix_json(demo_project, "tasks", "status", "--json")
    listed = helix_json(demo_project, "tasks", "list", "--json")
    code, _, body = http_session(server).get("/tasks")
    assert code == 200, body
    assert int(figure(body, "total")) == status["total"] == len(listed)
    assert int(figure(body, "ready")) == status["ready"]
    assert int(figure(body, "blocked")) == status["blocked"]
    for name in ("open", "in_progress", "closed"):
        assert int(figure(body, name)) == status["by_status"][name]
    for task in listed:
        assert f'href="{server.prefix}/task/{task["id"]}"' in body
        assert f'<tr data-task="{task["id"]}">' in body
    assert body.count('<a class="node ') == len(listed)


def test_each_task_page_agrees_with_helix_history(server: UiServer, demo_project: Path) -> None:
    client = http_session(server)
    for task in helix_json(demo_project, "tasks", "list", "--json"):
        code, _, body = client.get(f"/task/{task['id']}")
        assert code == 200, body
        history = helix_json(demo_project, "history", task["id"]) if "data-attempt" in body else []
        assert int(figure(body, "attempts")) == len(history)
        for attempt in history:
            part = body.split(f'data-attempt="{attempt["attempt"]}"', 1)[1].split("</article>")[0]
            for name in attempt["injected"]:
                assert f'href="{server.prefix}/insight/{name}"' in part
            if attempt["settled_at"]:
                assert figure(part, "outcome") == attempt["outcome"]
                assert figure(part, "claimed") == (attempt["claimed"] or "–")
                shown = figure(part, "verify_exit")
                assert shown == (
                    "–" if attempt["verify_exit"] is None else str(attempt["verify_exit"])
                )
    code, _, body = client.get("/task/hx-00000000")
    assert code == 404


@pytest.mark.browser
def test_the_tasks_pages_in_a_browser(server: UiServer, browser: Any, demo_project: Path) -> None:
    from selenium.webdriver.common.by import By

    login(browser, server, "/tasks")
    nodes = browser.find_elements(By.CSS_SELECTOR, "svg.taskgraph a.node")
    assert nodes
    screenshot(browser, "tasks")
    target = nodes[0].get_attribute("data-task")
    nodes[0].click()
    assert browser.current_url.endswith(f"/task/{target}")
    shown = int(browser.find_element(By.CSS_SELECTOR, '[data-figure="attempts"]').text)
    history = helix_json(demo_project, "history", target) if shown else []
    assert shown == len(history)
    browser.back()
    row = browser.find_element(By.CSS_SELECTOR, "#task-table tbody tr a")
    other = row.text
    row.click()
    assert browser.current_url.endswith(f"/task/{other}")
    browser.back()
    counted = {
        r.get_attribute("data-task"): int(
            r.find_element(By.CSS_SELECTOR, '[data-figure="attempts"]').text
        )
        for r in browser.find_elements(By.CSS_SELECTOR, "#task-table tbody tr")
    }
    busiest = max(counted, key=lambda t: counted[t])
    browser.get(f"{server.base}/task/{busiest}")
    assert browser.find_elements(By.CSS_SELECTOR, "article.attempt")
    screenshot(browser, "task")
