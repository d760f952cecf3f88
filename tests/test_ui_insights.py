"""The dashboard's Insights pages: the service's views on both engines (filters,
standings and their counts, evidence, usefulness over time), then the pages in
headless Chromium on a demo store, their figures checked against the CLI's JSON
and every correction made through the forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from stores import store_of

from helix.config import Paths
from helix.errors import InvalidInput, NotFound
from helix.memory import db, feedback, settlements
from helix.memory.embeddings import HashEmbedder
from helix.service import insights
from helix.service.actions import Service

LESSONS = {
    "deploy": "When deploying on Fridays, freeze migrations because rollbacks lack staff",
    "money": "When parsing invoices, round money in decimal because floats drift",
    "images": "When uploading images, strip metadata because it leaks locations",
    "mail": "When scheduling emails, store times in UTC because daylight saving shifts",
}


@pytest.fixture
def service(tmp_path: Path, engine) -> Service:
    home = tmp_path / "proj" / ".helix"
    return Service(Paths(home=home, db=store_of(home)), embedder=HashEmbedder(), route="ui")


def settle(svc: Service, names: list[str], outcome: str, task: str, attempt: str, exit_code: int):
    """One verified settlement as helix records it: the trial, the feedback
    events and the task outcome with VERIFY's exit code, one transaction."""
    with svc.memory() as mem, db.write(mem.conn):
        feedback.apply(mem, names, outcome, names[:1], task, True, attempt=attempt)
        settlements.record(
            mem.conn,
            {
                "task_id": task,
                "attempt": attempt,
                "claimed": "delivered",
                "outcome": outcome,
                "verified": 1,
                "passed": int(exit_code == 0),
                "verify_exit": exit_code,
                "injected": len(names),
                "utilized": 1,
                "baseline": 0.5,
                "created_at": mem.now(),
                "tampered": None,
            },
        )


def stocked(svc: Service) -> dict[str, str]:
    """Four insights: ``deploy`` helped three times, ``money`` failed three
    times, ``images`` untried and tagged, ``mail`` unused for 60 days."""
    names: dict[str, str] = {}
    with svc.memory() as mem:
        for key, text in LESSONS.items():
            tags = ["media", "privacy"] if key == "images" else []
            files = ["src/billing.py"] if key == "money" else []
            names[key] = mem.store(text, kind="pattern", tags=tags, files=files)["name"]
    for i in range(3):
        settle(svc, [names["deploy"], names["mail"]], "delivered", f"hx-d{i}", f"a-d{i}", 0)
        settle(svc, [names["money"]], "blocked", f"hx-m{i}", f"a-m{i}", 1)
    with svc.memory() as mem, db.write(mem.conn):
        mem.conn.execute(
            "UPDATE insight SET last_used = ?, created_at = ? WHERE name = ?",
            ("2020-01-01T00:00:00+00:00", "2020-01-01T00:00:00+00:00", names["mail"]),
        )
    return names


pytestmark = pytest.mark.usefixtures("engine")


def test_the_list_pages_by_usefulness_with_standings_and_counts(service: Service) -> None:
    names = stocked(service)
    view = insights.listing(service)
    order = [r["name"] for r in view["rows"]]
    assert view["mode"] == "list" and view["total"] == 4
    assert order[0] == names["deploy"] and order[-1] == names["money"]
    by_name = {r["name"]: r for r in view["rows"]}
    assert "failing" in by_name[names["money"]]["standings"]
    assert "unproven" in by_name[names["images"]]["standings"]
    assert "stale" in by_name[names["mail"]]["standings"]
    assert "unproven" not in by_name[names["deploy"]]["standings"]
    counts = view["counts"]
    assert counts["all"] == 4 and counts["failing"] == 1 and counts["stale"] == 1
    assert counts["unproven"] == 2  # images, and mail (present, never named as used)
    assert counts["archived"] == 0 and counts["quarantined"] == 0
    with service.memory() as mem:
        from helix.memory import proven

        assert counts["proven"] == proven.count(mem, service.paths.project)
        listed = mem.list(limit=50)
    assert order == [r["name"] for r in listed]  # helix memory list --json's order
    assert [r["effectiveness"] for r in view["rows"]] == [r["effectiveness"] for r in listed]


def test_filters_narrow_the_list_and_each_standing_lists_its_count(service: Service) -> None:
    names = stocked(service)
    assert [r["name"] for r in insights.listing(service, tag="MEDIA")["rows"]] == [names["images"]]
    assert [r["name"] for r in insights.listing(service, file="billing")["rows"]] == [
        names["money"]
    ]
    assert insights.listing(service, kind="failure")["rows"] == []
    full = insights.listing(service)["counts"]
    for standing in ("failing", "unproven", "stale", "quarantined", "proven"):
        view = insights.listing(service, status=standing)
        assert view["total"] == full[standing] == len(view["rows"]), standing
        assert all(standing in r["standings"] for r in view["rows"]), standing
    narrowed = insights.listing(service, tag="media")["counts"]
    assert narrowed["all"] == 1 and narrowed["unproven"] == 1 and narrowed["failing"] == 0


def test_bad_filters_are_refused(service: Service) -> None:
    stocked(service)
    for call in (
        lambda: insights.listing(service, kind="nonsense"),
        lambda: insights.listing(service, status="sideways"),
        lambda: insights.listing(service, order="random"),
    ):
        with pytest.raises(InvalidInput):
            call()
    with pytest.raises(NotFound):
        insights.detail(service, "no-such-insight")


def test_a_search_ranks_by_recall_and_explains_each_hit(service: Service) -> None:
    names = stocked(service)
    view = insights.listing(service, query="round money in decimal for invoices")
    assert view["mode"] == "search" and view["rows"]
    top = view["rows"][0]
    assert top["name"] == names["money"]
    assert top["ranking"]["relevance"] > 0 and "relevance" in top["why"]
    assert "failing" in top["standings"]
    recalled = service.recall("round money in decimal for invoices", limit=20)["hits"]
    assert [r["name"] for r in view["rows"]] == [h["name"] for h in recalled]
    narrowed = insights.listing(service, query="round money in decimal", status="unproven")
    assert names["money"] not in [r["name"] for r in narrowed["rows"]]


def test_one_insight_with_evidence_series_and_audit(service: Service) -> None:
    names = stocked(service)
    view = insights.detail(service, names["money"])
    assert view["live"] and view["item"]["kind"] == "pattern"
    trail = view["trail"]
    assert [e["task_id"] for e in trail] == ["hx-m2", "hx-m1", "hx-m0"]
    first = trail[-1]
    assert first["attempt"] == "a-m0" and first["verify_exit"] == 1
    assert first["verified"] and first["exposure"] == 1.0 and first["outcome"] == "blocked"
    assert view["totals"] == {"events": 3, "verified_events": 3, "trials": 3, "verified_trials": 3}
    series = view["series"]
    assert len(series["usefulness"]) == 3
    assert series["usefulness"] == [e["effectiveness"] for e in reversed(trail)]
    assert series["rate"] == [0.0, 0.0, 0.0] and series["dots"] == ["bad"] * 3
    low, high = series["band"][-1]
    assert (
        low == pytest.approx(0.0) and 0.4 < high < 0.6
    )  # 0 of 3: Wilson's 95% upper bound is 0.56
    assert series["failed"] == 3.0 == view["item"]["failed"]
    assert view["files"] == [{"pattern": "src/billing.py", "exists": False}]
    service.retag(names["money"], kind="failure", tags=["billing"])
    again = insights.detail(service, names["money"])
    assert again["item"]["kind"] == "failure" and again["item"]["tags"] == ["billing"]
    assert again["audit"][0]["verb"] == "retag" and again["audit"][0]["route"] == "ui"
    assert again["totals"]["events"] == 3


def test_archived_and_purged_insights_have_pages(service: Service) -> None:
    names = stocked(service)
    service.forget(names["deploy"])
    view = insights.detail(service, names["deploy"])
    assert not view["live"] and view["archived"] and not view["purged"]
    assert view["item"]["content"] == LESSONS["deploy"] and view["item"]["standings"] == [
        "archived"
    ]
    assert view["totals"]["events"] == 3  # the evidence stays with the name
    archived = insights.listing(service, status="archived")
    assert archived["mode"] == "archived" and [r["name"] for r in archived["rows"]] == [
        names["deploy"]
    ]
    assert archived["counts"]["archived"] == 1
    assert insights.listing(service, status="archived", kind="failure")["rows"] == []
    service.purge(names["deploy"])
    gone = insights.detail(service, names["deploy"])
    assert gone["purged"] and "content" not in gone["item"]
    assert [a["verb"] for a in gone["audit"]] == ["purge", "archive"]
    assert insights.listing(service, status="archived")["counts"]["archived"] == 0


def test_wilson_interval() -> None:
    assert insights.wilson(0, 0) is None
    low, high = insights.wilson(8, 2)
    assert 0.49 < low < 0.5 and 0.94 < high < 0.95
    low, high = insights.wilson(50, 50)
    assert low == pytest.approx(1 - high)
