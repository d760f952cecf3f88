"""The dashboard's Injections page: the service's views on both engines (each
recent attempt's insights, scores, cost and settlement; the preview, which
chooses as ``helix inject`` does and writes nothing), then the page over HTTP
and in headless Chromium on a demo store, checked against the CLI's JSON."""

from __future__ import annotations

import json
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
from helix.errors import InvalidInput
from helix.loop import contracts, injection, outcomes
from helix.memory.embeddings import HashEmbedder
from helix.service import injections
from helix.service.actions import Service

LESSONS = [
    "When parsing invoices, round money in decimal because floats drift",
    "When parsing invoice dates, keep the timezone offset because UTC shifts the day",
    "When uploading images, strip metadata because it leaks locations",
]
OBJECTIVE = "Parse the invoice totals and dates"
DELIVERED = "DELIVERED: done\n"
# Every table of the store (its schema as docs/schema.sql prints it), on either engine.
SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "schema.sql"
TABLES = [
    line.split()[-1]
    for line in SCHEMA.read_text().splitlines()
    if line.startswith("-- table ") and not line.split()[-1].startswith("insight_fts")
]


@pytest.fixture
def service(tmp_path: Path, engine, minilm) -> Service:
    """A project on the engine under test: every test using it runs once per engine."""
    home = tmp_path / "proj" / ".helix"
    home.mkdir(parents=True)
    withholding_off(store_of(home))  # a spawn shows all it was dealt
    return Service(Paths(home=home, db=store_of(home)), embedder=minilm, route="ui")


def stocked(svc: Service) -> list[str]:
    with svc.memory() as mem:
        return [mem.store(text, kind="pattern")["name"] for text in LESSONS]


def snapshot(svc: Service) -> dict[str, Any]:
    """Every table's rows (the insights' figures in full) and the data directory's
    files: what a read must leave exactly as it was."""
    with svc.memory() as mem:
        counts = {t: mem.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
        figures = mem.conn.execute(
            "SELECT name, use_count, last_used, helped, failed, effectiveness, uplift, evidence "
            "FROM insight ORDER BY name"
        ).fetchall()
    files = sorted(
        (str(p.relative_to(svc.paths.home)), p.stat().st_size)
        for p in svc.paths.home.rglob("*")
        if p.is_file() and not p.name.endswith((".lock", "-wal", "-shm"))
    )
    return {"counts": counts, "figures": [tuple(r) for r in figures], "files": files}


def attempt_at(svc: Service, title: str, verify: str, **fields: Any) -> tuple[str, str]:
    """A tracked task and an attempt at it as ``helix inject --tasks`` starts one."""
    tracker = tracker_of(svc.paths.home)
    task = tracker.create(title, verify=verify, **fields)
    with svc.memory() as mem:
        started = injection.batch_inject(
            mem,
            [injection.task_objective(task)],
            [task["id"]],
            3,
            project=svc.paths.project,
            judges=[injection.task_judge(task)],
        )
    return task["id"], started["results"][0]["attempt"]


def settle(svc: Service, task_id: str, output: str = DELIVERED) -> dict[str, Any]:
    """The builder's work (a file changed: a VERIFY that passed before any work
    is no evidence), then ``helix settle``."""
    (svc.paths.project / f"{task_id}.txt").write_text("done\n")
    with svc.memory() as mem:
        return dict(
            outcomes.finish(mem, tracker_of(svc.paths.home), task_id, output, svc.paths.home)
        )


def test_the_preview_chooses_as_inject_does_and_writes_nothing(service: Service) -> None:
    stocked(service)
    attempt_at(service, "an earlier task", "true")  # a ledger and a tracker to leave alone
    before = snapshot(service)
    shown = injections.preview(service, OBJECTIVE, ["src/invoices.py"], 2)
    assert snapshot(service) == before
    with service.memory(create=False) as mem:
        chosen = injection.inject(
            mem, OBJECTIVE, None, 2, ["src/invoices.py"], service.paths.project
        )
    assert snapshot(service) == before
    assert shown["names"] == chosen["names"] and len(shown["names"]) == 2
    assert shown["block"] == chosen["block"] and shown["recorded"] is False
    assert shown["received"] == (
        f"INSIGHTS: {contracts.insights_value(chosen['block'])}\n"
        f"INJECTED: {json.dumps(chosen['names'])}\n"
    )
    assert shown["tokens"] == injections.tokens(shown["received"]) > 0
    for item, given in zip(shown["insights"], chosen["insights"], strict=True):
        assert item["name"] == given["name"] and item["score"] == given["score"]
        assert item["relevance"] == given["relevance"]
        assert item["uplift"] == given["uplift"]["uplift"] and item["sd"] == given["uplift"]["sd"]
        assert item["tokens"] > 0


def test_a_preview_of_nothing_relevant_or_of_no_store(service: Service, tmp_path: Path) -> None:
    empty = Service(Paths.at(tmp_path / "none" / ".helix"), embedder=HashEmbedder(), route="ui")
    shown = injections.preview(empty, OBJECTIVE)
    assert shown["names"] == [] and shown["received"] == "" and shown["tokens"] == 0
    assert not (tmp_path / "none").exists()  # asking never creates a store


def test_the_preview_refuses_what_inject_would(service: Service) -> None:
    for objective in ("", "   \n "):
        with pytest.raises(InvalidInput, match="empty"):
            injections.preview(service, objective)
    with pytest.raises(InvalidInput, match="at most"):
        injections.preview(service, "x" * (injections.MAX_OBJECTIVE + 1))
    with pytest.raises(InvalidInput, match="limit"):
        injections.preview(service, OBJECTIVE, None, 0)
    assert injections.split_files("a.py, b.py\nc.py a.py") == ["a.py", "b.py", "c.py"]
    with pytest.raises(InvalidInput, match="at most"):
        injections.split_files(" ".join(f"f{i}.py" for i in range(injections.MAX_FILES + 1)))


def test_recent_spawns_show_what_was_given_and_how_it_settled(service: Service) -> None:
    names = stocked(service)
    passed, first = attempt_at(service, "Round invoice money in decimal", "true")
    failed, second = attempt_at(service, "Parse invoice dates with the offset", "false")
    _open, third = attempt_at(service, "Strip image metadata on upload", "true")
    settle(service, passed)
    settle(service, failed)
    view = injections.recent(service)
    assert view["total"] == 3 and view["pages"] == 1
    by_id = {s["attempt"]: s for s in view["spawns"]}
    assert [s["attempt"] for s in view["spawns"]][0] == third  # newest first
    won, lost, running = by_id[first], by_id[second], by_id[third]
    assert won["outcome"] == "delivered" and won["verified"] is True
    assert won["verify_exit"] == 0 and won["claimed"] == "delivered" and won["passed"] is True
    assert lost["outcome"] == "blocked" and lost["verify_exit"] == 1 and lost["verified"] is True
    assert running["open"] is True and running["outcome"] is None
    for spawn in view["spawns"]:
        given = [i["name"] for i in spawn["insights"]]
        assert given and set(given) <= set(names)
        assert all(i["score"] is not None and i["live"] for i in spawn["insights"])
        assert spawn["tokens"] > 0 and spawn["tampered"] is None
    summary = view["summary"]
    assert (summary["settled"], summary["open"], summary["delivered"]) == (2, 1, 1)
    paged = injections.recent(service, page=2, per_page=2)
    assert paged["pages"] == 2 and [s["attempt"] for s in paged["spawns"]] == [first]


def test_a_tampered_attempt_is_flagged(service: Service) -> None:
    stocked(service)
    task_id, attempt = attempt_at(service, "Round invoice money", "false")
    tracker_of(service.paths.home).update(task_id, verify="true")  # the builder's shell
    settle(service, task_id)
    spawn = injections.recent(service)["spawns"][0]
    assert spawn["attempt"] == attempt and spawn["tampered"]
    assert spawn["verified"] is False and injections.recent(service)["summary"]["tampered"] == 1


def test_an_insight_archived_since_is_listed_but_not_costed(service: Service) -> None:
    stocked(service)
    task_id, _ = attempt_at(service, "Round invoice money in decimal", "true")
    settle(service, task_id)  # a correction waits until no attempt is in flight
    spawn = injections.recent(service)["spawns"][0]
    gone = spawn["insights"][0]["name"]
    service.forget(gone)
    again = injections.recent(service)["spawns"][0]
    assert [i["name"] for i in again["insights"]] == [i["name"] for i in spawn["insights"]]
    assert again["missing"] == 1 and not again["insights"][0]["live"]
    assert again["tokens"] < spawn["tokens"]


def test_an_empty_store_has_no_spawns(service: Service) -> None:
    view = injections.recent(service)
    assert view["total"] == 0 and view["spawns"] == [] and view["pages"] == 1


# --- the page, on the demo store ---------------------------------------------------


@pytest.fixture(scope="module")
def server(demo_project: Path):
    with UiServer(demo_project) as running:
        yield running


def figure(body: str, name: str) -> str:
    found = re.search(rf'data-figure="{name}">([^<]*)<', body)
    assert found, name
    return found.group(1).replace("≈", "").replace(",", "").strip()


def test_the_injections_page_agrees_with_helix_history(
    server: UiServer, demo_project: Path
) -> None:
    client = http_session(server)
    status, _, body = client.get("/injections")
    assert status == 200, body
    tasks = sorted(set(re.findall(rf'href="{server.prefix}/task/([\w-]+)"', body)))
    assert tasks
    attempts = [a for t in tasks for a in helix_json(demo_project, "history", t)]
    assert int(figure(body, "attempts")) == len(attempts)
    for attempt in attempts:
        row = body.split(f'data-attempt="{attempt["attempt"]}"', 1)[1].split("</tr>", 1)[0]
        for name in attempt["injected"]:
            assert f'href="{server.prefix}/insight/{name}"' in row
        if attempt["verify_exit"] is not None:
            assert f'<span class="mono">{attempt["verify_exit"]}</span>' in row
        assert ('badge good">verified' in row) == bool(attempt["verified"])


def test_the_preview_over_http_equals_helix_inject_preview(
    server: UiServer, demo_project: Path
) -> None:
    client = http_session(server)
    objective = "Parse the expiry timestamp in the config loader"
    cli = helix_json(demo_project, "inject", "--preview", objective, "--limit", "3")
    plain = helix_json(demo_project, "inject", objective, "--limit", "3")
    assert cli["names"] == plain["names"] and cli["block"] == plain["block"]
    status, _, part = client.post(
        "/injections/preview", {"objective": objective, "limit": "3", "files": ""}, htmx=True
    )
    assert status == 200 and "<html" not in part
    assert int(figure(part, "preview_insights")) == len(cli["names"])
    assert int(figure(part, "preview_tokens")) == cli["tokens"]
    for name in cli["names"]:
        assert f'data-name="{name}"' in part
    status, _, whole = client.post("/injections/preview", {"objective": objective, "limit": "3"})
    assert status == 200 and "<html" in whole and 'id="preview-block"' in whole
    status, _, refused = client.post("/injections/preview", {"objective": "  "}, htmx=True)
    assert status == 200 and 'id="preview-error"' in refused and "empty" in refused
    status, _, refused = client.post("/injections/preview", {"objective": "x" * 20_001})
    assert status == 400 and "at most" in refused


@pytest.mark.browser
def test_the_injections_page_in_a_browser(server: UiServer, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    login(browser, server, "/injections")
    assert browser.find_elements(By.CSS_SELECTOR, "#spawns tbody tr")
    screenshot(browser, "injections")
    box = browser.find_element(By.ID, "preview-objective")
    box.send_keys("Read settings.toml in the config loader")
    browser.find_element(By.ID, "preview-submit").click()
    WebDriverWait(browser, 20).until(
        seen.presence_of_element_located((By.CSS_SELECTOR, "#preview-result #preview-block"))
    )
    assert browser.current_url.endswith("/injections")  # htmx swapped it in place
    block = browser.find_element(By.ID, "preview-block").text
    assert block.startswith("INSIGHTS:") and "INJECTED:" in block
    tokens = browser.find_element(By.CSS_SELECTOR, '[data-figure="preview_tokens"]').text
    assert int(tokens.replace("≈", "").strip()) > 0
    browser.find_element(By.ID, "preview").location_once_scrolled_into_view  # noqa: B018
    screenshot(browser, "preview")


def test_the_mcp_tool_previews_as_the_cli_does(demo_project: Path) -> None:
    import anyio
    from mcp_client import error, ok, stdio_client

    objective = "Combine timestamps and overrides in the config loader"
    cli = helix_json(demo_project, "inject", "--preview", objective, "--limit", "4")
    ledger = Service(Paths.at(demo_project / ".helix"), route="ui")
    before = injections.recent(ledger)["total"]

    async def main() -> tuple[Any, str]:
        async with stdio_client(demo_project) as client:
            shown = await ok(client, "preview", objective=objective, limit=4)
            refused = await error(client, "preview", {"objective": ""})
        return shown, refused

    shown, refused = anyio.run(main)
    assert shown["names"] == cli["names"] and shown["received"] == cli["received"]
    assert shown["tokens"] == cli["tokens"] and shown["recorded"] is False
    assert "objective" in refused
    assert injections.recent(ledger)["total"] == before
