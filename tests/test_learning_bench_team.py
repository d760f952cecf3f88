"""The team scenario of the learning-curve benchmark (``run.py --team N``): the
configuration it runs and the report it renders, on synthetic results. The
benchmark itself is never run here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from learning import draws, run, team  # noqa: E402

ARMS = ("no_memory", "relevance_only", "helix", "oracle")
# Per arm, a pass rate per seed; the team's are higher for helix and relevance.
SOLO_RATES = {"no_memory": 0.45, "relevance_only": 0.55, "helix": 0.60, "oracle": 0.85}
TEAM_RATES = {"no_memory": 0.45, "relevance_only": 0.62, "helix": 0.72, "oracle": 0.90}


def test_a_team_has_n_times_the_tasks_in_waves_n_times_as_wide():
    solo = draws.Config(world="b")
    five = team.scaled(solo, 5)
    assert (five.tasks, five.wave, five.block) == (5 * solo.tasks, 5 * solo.wave, 5 * solo.block)
    # The same hours per wave and waves per session: the same time, more tasks in it.
    assert (five.hours_per_wave, five.session_waves) == (solo.hours_per_wave, solo.session_waves)
    assert (five.world, five.limit, five.drift) == (solo.world, solo.limit, solo.drift)
    assert five.tasks // five.wave == solo.tasks // solo.wave  # as many waves
    quick = team.scaled(draws.Config.quick(), 3)
    assert (quick.tasks, quick.wave) == (240, 12)


def test_a_team_of_one_is_the_solo_configuration():
    cfg = draws.Config()
    assert team.scaled(cfg, 1) is cfg
    with pytest.raises(ValueError):
        team.scaled(cfg, 0)


def test_a_team_faces_the_solo_tasks_first():
    cfg = draws.Config()
    solo, five = draws.tasks_for(1001, cfg), draws.tasks_for(1001, team.scaled(cfg, 5))
    assert len(five) == 5 * len(solo)
    assert five[: len(solo)] == solo


def test_measure_passes_the_team_configuration_and_keeps_solo_results_as_they_were(
    monkeypatch,
):
    seen = []

    def fake_run(cfg, seeds, chosen, log):
        seen.append(cfg)
        return {"config": {}, "seeds": list(seeds)}

    monkeypatch.setattr(run.simulation, "run", fake_run)
    monkeypatch.setattr(run.common, "machine_info", dict)
    solo = run.measure(False, "heldout", ["helix"], seed_count=1)
    five = run.measure(False, "heldout", ["helix"], seed_count=1, developers=5)
    assert seen[0] == draws.Config()
    assert seen[1] == team.scaled(draws.Config(), 5)
    assert "team" not in solo and "--team" not in solo["command"]
    assert five["team"] == 5 and five["command"].endswith("--seed-count 1 --team 5")
    # A team's results go to files of their own; the solo ones stay where they were.
    assert run.paths("a", 5)["results"].name == "results_team.json"
    assert run.paths("b", 5)["results"].name == "results_team_b.json"
    assert run.paths("b", 5)["pools"] is None and run.paths("b", 5)["plot"] is None
    assert run.paths("b")["results"].name == "results_b.json"
    assert run.paths("a")["pools"].name == "pools.json.gz"


def _results(rates, seeds, cfg, developers=1):
    """A results dict as run.py writes it, with only what the team report reads:
    per arm and seed, four blocks around ``rate``, from -0.06 to +0.06."""
    arms = {}
    for arm, rate in rates.items():
        per_seed = {}
        for k, seed in enumerate(seeds):
            r = rate + 0.01 * (k % 3)  # seeds differ a little, so intervals exist
            blocks = [r - 0.06, r - 0.02, r + 0.02, r + 0.06]
            per_seed[str(seed)] = {
                "blocks": blocks,
                "overall": sum(blocks) / 4,
                "last_quarter": blocks[-1],
            }
        arms[arm] = {"per_seed": per_seed}
    out = {
        "arms": arms,
        "seeds": list(seeds),
        "config": dict(cfg.__dict__),
        "seed_set": "held-out",
        "total_s": 600.0,
        "command": "python benchmarks/learning/run.py",
        "machine": {"git_commit": "abc1234"},
    }
    if developers > 1:
        out["team"] = developers
    return out


def test_the_team_report_compares_each_arm_with_the_solo_seeds():
    cfg = draws.Config.quick()
    solo = _results(SOLO_RATES, [1001, 1002, 1003, 1004], cfg)
    five = _results(TEAM_RATES, [1001, 1002, 1003, 1005], team.scaled(cfg, 5), developers=5)
    text = team.markdown(five, solo)
    assert "a team of 5 sharing one store (world A)" in text
    assert "400 tasks per seed (80 per developer), blocks of 100 tasks (20 per developer" in text
    assert "same 3 seeds (1001, 1002, 1003" in text
    assert "Seeds without solo figures (team only): 1005." in text
    lines = text.splitlines()
    helix = [line for line in lines if line.startswith("| helix |")]
    assert len(helix) == 3  # pass rates, gap closed, blocks
    # Overall rate of helix: (0.60 + 0.61 + 0.62) / 3 (the blocks average to the rate)
    assert "| helix | 61.0% [" in helix[0] and "| 73.0% [" in helix[0]
    assert "+12.0 points" in helix[0]
    # Gap closed, solo: 5 / 30 points; team: 10 / 28.
    assert helix[1].startswith("| helix | 17% [") and "| 36% [" in helix[1]
    assert helix[2] == "| helix | 55 / 67 | 59 / 71 | 63 / 75 | 67 / 79 |"
    said = next(line for line in lines if line.startswith("- **helix**"))
    assert "overall 61.0% -> 73.0% (+12.0 points [" in said and ": higher)" in said
    assert "Gap closed: overall 17% [" in said
    no_memory = next(line for line in lines if line.startswith("- **no memory**"))
    assert "+0.0 points" in no_memory and "not distinguishable from zero" in no_memory
    oracle = next(line for line in lines if line.startswith("- **oracle**"))
    assert "Gap closed" not in oracle  # the oracle closes its own gap by definition


def test_the_team_report_says_why_it_cannot_compare():
    cfg = draws.Config()
    five = _results(TEAM_RATES, [2001, 2002], team.scaled(cfg, 5), developers=5)
    five["config"]["world"] = "b"
    text = team.markdown(five, None)
    assert "a team of 5 sharing one store (world B)" in text
    assert "No comparison with one developer: no solo results were found" in text
    assert "| helix | 72.5% [" in text and "| 36% [" in text
    # A solo run of another length (a --quick one, say) is not the same seeds' solo figures.
    quick = _results(SOLO_RATES, [2001, 2002], draws.Config.quick(world="b"))
    assert "differs in tasks" in team.markdown(five, quick)


def test_the_team_report_says_how_sharing_moved_helix_lead_over_relevance():
    cfg = draws.Config.quick()
    solo = _results(SOLO_RATES, [1001, 1002, 1003], cfg)
    five = _results(TEAM_RATES, [1001, 1002, 1003], team.scaled(cfg, 5), developers=5)
    said = next(
        line
        for line in team.markdown(five, solo).splitlines()
        if line.startswith("- **helix minus relevance-only**")
    )
    # helix leads by 5 points alone and by 10 in the team, on every seed.
    assert "overall +5.0 points [+5.0 to +5.0] alone, +10.0 points" in said
    assert "(moved by +5.0 points [+5.0 to +5.0]: higher)" in said
