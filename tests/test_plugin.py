"""The Claude Code plugin in the repository root: its manifests, agents, skills and
hooks, checked against helix's own contracts, against the real `claude plugin
validate`, and for the shell safety of every command the skills and agents show.

Shell safety: the orchestrator copies these examples, filling in text a model
wrote. Such text must reach a shell only through a file or a quoted heredoc, so
`shell_problems` refuses the forms in which it would be evaluated: command
substitution, backticks, unquoted heredocs and here-strings, and double-quoted
arguments to helix.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import helix
from helix.loop import contracts

ROOT = Path(__file__).resolve().parents[1]
# The plugin ships inside the package; the repository root is its marketplace.
PLUGIN_ROOT = ROOT / "helix" / "plugin"
PLUGIN = PLUGIN_ROOT / ".claude-plugin" / "plugin.json"
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
HOOKS = PLUGIN_ROOT / "hooks" / "hooks.json"
AGENTS = ("explorer", "planner", "builder")
SKILLS = ("helix", "helix-query", "helix-stats")
RUN_HOOK = "${CLAUDE_PLUGIN_ROOT}/hooks/run-hook"
# Hook events documented for Claude Code plugins (hooks/hooks.json may use any).
DOCUMENTED_EVENTS = {
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "UserPromptSubmit",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "SessionStart",
    "SessionEnd",
}
MODELS = {"sonnet", "opus", "haiku", "inherit"}


def package_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["project"]["version"]


def frontmatter(path: Path) -> dict[str, str]:
    """The ``key: value`` lines between the leading ``---`` fences (flat YAML,
    which is all agent and skill files use)."""
    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, f"{path.relative_to(ROOT)} has no frontmatter"
    fields = {}
    for line in match.group(1).splitlines():
        if line.strip() and not line.startswith((" ", "#")):
            key, sep, value = line.partition(":")
            assert sep, f"{path.relative_to(ROOT)}: not a key: value line: {line!r}"
            # Unquoted, ": " or " #" would make the value something else in YAML.
            assert not re.search(r": | #", value), f"{path.relative_to(ROOT)}: quote {key}"
            fields[key.strip()] = value.strip()
    return fields


def markdown_files() -> list[Path]:
    return sorted([*(PLUGIN_ROOT / "skills").rglob("*.md"), *(PLUGIN_ROOT / "agents").glob("*.md")])


def code_blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, language, lines) of every fenced code block, its lines
    dedented by the fence's own indentation (a block inside a list item)."""
    blocks, current, fence, indent = [], None, "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if current is None:
            match = re.match(r"(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if match:
                fence, indent = match.group(1), len(line) - len(line.lstrip(" "))
                current = (number, match.group(2).lower(), [])
        elif stripped.startswith(fence) and not stripped[len(fence) :].strip():
            blocks.append(current)
            current = None
        else:
            margin = len(line) - len(line.lstrip(" "))
            current[2].append(line[min(indent, margin) :])
    if current is not None:
        blocks.append(current)
    return blocks


# ----------------------------------------------------------------- manifests
def test_plugin_manifest_matches_the_package() -> None:
    manifest = json.loads(PLUGIN.read_text(encoding="utf-8"))
    assert manifest["name"] == "helix"
    assert manifest["version"] == package_version() == helix.__version__
    assert manifest["description"].strip()
    assert manifest["author"]["name"].strip()
    assert manifest["keywords"] and all(isinstance(k, str) for k in manifest["keywords"])


@pytest.mark.parametrize(
    ("marketplace", "source"),
    [(MARKETPLACE, "./helix/plugin"), (PLUGIN_ROOT / ".claude-plugin" / "marketplace.json", "./")],
    ids=["repository", "package"],
)
def test_marketplace_lists_the_plugin(marketplace: Path, source: str) -> None:
    """The repository (for a git URL) and the installed package (for `helix install
    claude` from any install) are the same marketplace, serving the same plugin."""
    market = json.loads(marketplace.read_text(encoding="utf-8"))
    assert market["name"] == "helix-marketplace"
    assert market["owner"]["name"].strip()
    [entry] = [p for p in market["plugins"] if p["name"] == "helix"]
    assert entry["source"] == source
    assert (marketplace.parent.parent / source / ".claude-plugin" / "plugin.json").is_file()
    assert entry.get("version", package_version()) == package_version()


def test_hooks_call_run_hook_for_documented_events() -> None:
    config = json.loads(HOOKS.read_text(encoding="utf-8"))
    assert config["hooks"], "hooks.json registers no hooks"
    for event, groups in config["hooks"].items():
        assert event in DOCUMENTED_EVENTS, f"{event} is not a documented hook event"
        for group in groups:
            for hook in group["hooks"]:
                assert hook["type"] == "command"
                assert RUN_HOOK in hook["command"], hook["command"]
                assert hook["command"].split()[-1] == event
    assert os.access(PLUGIN_ROOT / "hooks" / "run-hook", os.X_OK)


# ---------------------------------------------------------- agents and skills
@pytest.mark.parametrize("name", AGENTS)
def test_agent_frontmatter(name: str) -> None:
    fields = frontmatter(PLUGIN_ROOT / "agents" / f"{name}.md")
    assert fields["name"] == name
    assert len(fields["description"]) > 40
    tools = {t.strip() for t in fields["tools"].split(",")}
    # Claude Code 2.1.329 has no Grep or Glob tool: agents search through Bash.
    assert {"Read", "Bash"} <= tools
    if name == "builder":
        assert {"Edit", "Write"} <= tools
    else:
        assert not tools & {"Edit", "Write"}, f"the {name} is read-only"
    assert fields.get("model", "inherit") in MODELS
    # Claude Code ignores these for plugin agents (and warns when it loads them).
    assert not fields.keys() & {"permissionMode", "hooks", "mcpServers"}
    if "maxTurns" in fields:
        assert int(fields["maxTurns"]) > 0


@pytest.mark.parametrize("name", SKILLS)
def test_skill_frontmatter(name: str) -> None:
    fields = frontmatter(PLUGIN_ROOT / "skills" / name / "SKILL.md")
    assert fields["name"] == name
    assert len(fields["description"]) > 40


def test_every_skill_directory_is_known() -> None:
    found = {p.parent.name for p in (PLUGIN_ROOT / "skills").glob("*/SKILL.md")}
    assert found == set(SKILLS)


@pytest.mark.parametrize(
    "name, fields",
    [
        ("explorer", contracts.EXPLORER_FIELDS),
        ("planner", contracts.PLANNER_FIELDS),
        ("builder", contracts.BUILDER_FIELDS),
    ],
)
def test_agents_document_their_prompt_fields(name: str, fields: tuple[str, ...]) -> None:
    text = (PLUGIN_ROOT / "agents" / f"{name}.md").read_text(encoding="utf-8")
    for field in fields:
        assert f"`{field}:`" in text, f"agents/{name}.md does not explain {field}"


def _blocks(path: Path, language: str) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return ["\n".join(lines) for _n, lang, lines in code_blocks(text) if lang == language]


def test_explorer_example_is_what_helix_parses() -> None:
    [example] = _blocks(PLUGIN_ROOT / "agents" / "explorer.md", "json")
    found = contracts.parse_exploration("Mapped src/api.\n" + example)
    assert found.problems == []
    assert found.findings["scope"] == "src/api/"
    assert found.findings["findings"][0]["action"] == "modify"
    assert found.findings["framework"]["detected"] == "Flask"
    assert found.findings["memories"][0]["content"].startswith("When ")


def test_planner_example_is_what_helix_parses() -> None:
    [example] = [
        b for b in _blocks(PLUGIN_ROOT / "agents" / "planner.md", "text") if "PLAN_SPEC" in b
    ]
    plan = contracts.parse_plan(example)
    assert plan.ok, plan.problems
    assert [t["seq"] for t in plan.tasks] == ["001", "002"]
    assert plan.tasks[1]["blocked_by"] == ["001"]
    assert all(t["verify"] and t["delta"] and t["budget"] for t in plan.tasks)
    assert len(plan.insights) == 1
    assert contracts.parse_outcome(example).plan_complete


def test_builder_examples_are_what_helix_parses() -> None:
    blocks = _blocks(PLUGIN_ROOT / "agents" / "builder.md", "text")
    by_marker = {b.split(":", 1)[0]: b for b in blocks}
    assert contracts.parse_outcome(by_marker["DELIVERED"]).status == "delivered"
    blocked = contracts.parse_outcome(by_marker["BLOCKED"])
    assert (blocked.status, blocked.problems) == ("blocked", [])
    partial = contracts.parse_outcome(by_marker["PARTIAL"])
    assert (partial.status, partial.problems) == ("partial", [])
    assert contracts.parse_outcome(by_marker["UTILIZED"]).utilized == ["check-token-expiry-first"]
    assert len(contracts.parse_outcome(by_marker["INSIGHT"]).insights) == 1
    complete = contracts.parse_outcome(blocks[-1])
    assert complete.status == "delivered"
    assert complete.problems == []
    assert complete.utilized == ["check-token-expiry-first"]
    assert complete.insights[0]["tags"] == ["dates", "testing"]


def test_skill_builder_prompt_is_a_builder_prompt() -> None:
    [template] = [
        b for b in _blocks(PLUGIN_ROOT / "skills" / "helix" / "SKILL.md", "text") if "TASK_ID:" in b
    ]
    prompt = contracts.parse_prompt(template)
    assert prompt.agent == "builder"
    assert prompt.problems == []
    assert list(prompt.fields) == list(contracts.BUILDER_FIELDS)
    assert prompt.fields["INJECTED"] == ["parse-api-timestamps-trailing-z"]
    assert prompt.fields["BUDGET"] == 12
    assert prompt.fields["INSIGHTS"].splitlines()[0] == contracts.INSIGHTS_NOTE


# --------------------------------------------------------------- shell safety
SHELL_LANGUAGES = {"sh", "bash", "shell", "zsh", "console"}
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(?:'([^']+)'|\"([^\"]+)\"|\\(\w+)|(\w+))?")
_SINGLE_QUOTED = re.compile(r"'[^']*'")
_HELIX_CALL = re.compile(r"(?:^|[;&|(]\s*)helix\s")


def shell_problems(text: str) -> list[str]:
    """What in this markdown would let a shell evaluate text a model wrote.

    Checked: every sh/bash code block (the bodies of quoted heredocs are data and
    are skipped), code blocks that run helix without a shell language, and inline
    code that starts with ``helix``.
    """
    problems = []
    for start, language, lines in code_blocks(text):
        if language in SHELL_LANGUAGES:
            problems += _shell_block_problems(start, lines)
        elif lines and not language and lines[0].lstrip().startswith("helix "):
            problems.append(f"line {start}: a block that runs helix must be tagged sh")
    for number, line in enumerate(text.splitlines(), start=1):
        for span in re.findall(r"`([^`\n]+)`", line):
            if span.startswith("helix ") and re.search(r"\"|\$\(|<<", span):
                problems.append(f"line {number}: inline command quotes or substitutes: {span}")
    return problems


def _shell_block_problems(start: int, lines: list[str]) -> list[str]:
    problems: list[str] = []
    heredocs: list[tuple[str, bool]] = []  # (delimiter, <<- strips tabs) of open bodies
    for offset, line in enumerate(lines, start=1):
        where = f"line {start + offset}"
        if heredocs:
            delimiter, tabs = heredocs[0]
            if (line.lstrip("\t") if tabs else line) == delimiter:
                heredocs.pop(0)
            continue
        if '"$(' in line:
            problems.append(f'{where}: "$( runs a command inside double quotes')
        elif "$(" in line:
            problems.append(f"{where}: $( command substitution")
        if "`" in line:
            problems.append(f"{where}: backticks run a command")
        if "<<<" in line:
            problems.append(f"{where}: a here-string expands its text; use a quoted heredoc")
        for match in _HEREDOC.finditer(line):
            tabs = match.group(0).startswith("<<-")
            quoted = match.group(1) or match.group(2) or match.group(3)
            if quoted:
                heredocs.append((quoted, tabs))
            else:
                problems.append(f"{where}: unquoted heredoc; write <<'{match.group(4) or 'EOF'}'")
                if match.group(4):
                    heredocs.append((match.group(4), tabs))
        bare = _SINGLE_QUOTED.sub("", _HEREDOC.sub("", line))
        if _HELIX_CALL.search(line) and '"' in bare:
            problems.append(f"{where}: double-quoted argument to helix; pass the text on stdin")
    problems += [f"line {start}: heredoc {d} is never closed" for d, _tabs in heredocs]
    return problems


def _fenced(body: str, language: str = "sh") -> str:
    return f"```{language}\n{body}\n```\n"


@pytest.mark.parametrize(
    "snippet, expected",
    [
        (_fenced('helix memory store --content "$(cat notes.txt)"'), '"$('),
        (_fenced("helix memory store --content - < `ls notes*`"), "backticks"),
        (_fenced("helix memory store --content - <<EOF\nWhen X, do Y\nEOF"), "unquoted heredoc"),
        (_fenced("helix memory store --content - << EOF\nWhen X\nEOF"), "unquoted heredoc"),
        (_fenced("helix strategic-recall - <<-EOF\n\tadd login\n\tEOF"), "unquoted heredoc"),
        (_fenced("cat <<EOF | helix tasks plan -\nPLAN_SPEC: []\nEOF"), "unquoted heredoc"),
        (_fenced("helix memory recall - <<< $QUESTION"), "here-string"),
        (_fenced('helix strategic-recall "add OAuth login"'), "double-quoted argument"),
        (_fenced('helix tasks close hx-1 --summary "Added /login"'), "double-quoted argument"),
        (_fenced("helix memory recall - <<'Q'\nfix tests"), "never closed"),
        (_fenced("helix wait builders --task-ids $(cat ids)"), "$( command substitution"),
        (_fenced('helix memory store --content "`id`"', "bash"), "backticks"),
        ("```\nhelix memory recall x\n```\n", "must be tagged sh"),
        ('Run `helix memory recall "fix auth"` first.\n', "inline command"),
    ],
)
def test_shell_checker_refuses(snippet: str, expected: str) -> None:
    problems = shell_problems(snippet)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    "snippet",
    [
        _fenced(
            "helix memory store --content - --tags '[\"a\", \"b\"]' <<'HELIX_TEXT'\n"
            'When `make` says "$(CC)" is missing, run `which cc` because $PATH differs\n'
            "HELIX_TEXT"
        ),
        _fenced('helix strategic-recall - <<"EOF"\nadd $(login)\nEOF'),
        _fenced("helix memory recall - <<\\EOF\n`backticks` are data here\nEOF"),
        _fenced("helix wait builders --task-ids hx-1,hx-2 --since 2026-11-21T12:00:00Z"),
        _fenced('echo "not helix" && git ls-files | head -80'),
        _fenced('DELIVERED: "quoted" `text`', "text"),
        "Use `helix tasks ready --json` and `helix memory store --content -`.\n",
    ],
)
def test_shell_checker_accepts(snippet: str) -> None:
    assert shell_problems(snippet) == []


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_plugin_markdown_is_shell_safe(path: Path) -> None:
    assert shell_problems(path.read_text(encoding="utf-8")) == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_plugin_shell_examples_parse(path: Path) -> None:
    for start, language, lines in code_blocks(path.read_text(encoding="utf-8")):
        if language in SHELL_LANGUAGES:
            result = subprocess.run(
                ["bash", "-n"], input="\n".join(lines) + "\n", capture_output=True, text=True
            )
            # stderr too: an unterminated heredoc is only a warning to bash.
            assert (result.returncode, result.stderr) == (0, ""), f"block at line {start}"


def _helix_commands(text: str) -> list[list[str]]:
    """Argument lists of the helix commands in the sh blocks (heredoc bodies and
    everything after a pipe, redirect or ``&&`` left out; a line ending in ``\\``
    continues on the next). Lines that do not run helix are skipped."""
    commands = []
    for _start, language, lines in code_blocks(text):
        if language not in SHELL_LANGUAGES:
            continue
        body: list[str] = []
        skip_until = None
        for line in lines:
            if skip_until is not None:
                if line.strip() == skip_until:
                    skip_until = None
                continue
            match = _HEREDOC.search(line)
            if match:
                skip_until = match.group(1) or match.group(2) or match.group(3) or match.group(4)
            if body and body[-1].endswith("\\"):
                body[-1] = body[-1][:-1] + " " + line.strip()
            else:
                body.append(line)
        for line in body:
            for part in re.split(r"&&|\|\||;", line):
                words = shlex.split(re.split(r"\s(?:\||<<|<|>)", part)[0], comments=True)
                # helix itself or a path to it (.venv/bin/helix); `pipx install
                # /path/to/helix` installs it and is not a helix command.
                if words and (words[0] == "helix" or words[0].endswith("/helix")):
                    commands.append(words[1:])
    return commands


@pytest.mark.parametrize(
    "path", [*markdown_files(), ROOT / "README.md"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_plugin_helix_commands_exist(path: Path) -> None:
    """Every helix command the skills, the agents and the README show parses with
    the real CLI (parsed against the click command tree, never run)."""
    import click

    from helix.cli import cli

    for words in _helix_commands(path.read_text(encoding="utf-8")):
        command, args, name = cli, list(words), "helix"
        # Contexts chained from the root's, as the real CLI builds them: click caches
        # each command's help option, and a parentless context would cache one
        # without the root's "-h" (which docs/cli.md then shows differently).
        parent = cli.make_context("helix", [], resilient_parsing=True)
        while isinstance(command, click.Group) and args and not args[0].startswith("-"):
            name = args.pop(0)
            assert name in command.commands, f"no such command: helix {' '.join(words)}"
            command = command.commands[name]
            if isinstance(command, click.Group) and args and not args[0].startswith("-"):
                parent = command.make_context(name, [], parent=parent, resilient_parsing=True)
        try:
            command.make_context(name, args, parent=parent)
        except click.exceptions.Exit:
            pass  # --version and --help exit on purpose
        except click.UsageError as exc:
            pytest.fail(f"helix {' '.join(words)}: {exc.format_message()}")


# --------------------------------------------------------- the real validator
def claude_binary() -> tuple[str | None, str]:
    """The Claude Code CLI to test with, or None and why not: HELIX_CLAUDE_BIN when
    set, else the pinned copy `make claude-cli` installs into .cache/npm."""
    chosen = os.environ.get("HELIX_CLAUDE_BIN")
    if chosen:
        if os.access(chosen, os.X_OK):
            return chosen, ""
        return None, f"HELIX_CLAUDE_BIN={chosen} is not an executable file"
    pinned = ROOT / ".cache" / "npm" / "node_modules" / ".bin" / "claude"
    if os.access(pinned, os.X_OK):
        return str(pinned), ""
    return None, (
        "Claude Code CLI not found: run `make claude-cli` (installs the pinned "
        "@anthropic-ai/claude-code into .cache/npm) or set HELIX_CLAUDE_BIN"
    )


@pytest.fixture
def claude(tmp_path: Path):
    binary, reason = claude_binary()
    if binary is None:
        pytest.skip(reason)
    home = tmp_path / "claude-home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }

    def validate(target: Path) -> dict:
        result = subprocess.run(
            [binary, "plugin", "validate", "--strict", "--json", str(target)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        try:
            report = json.loads(result.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"validate printed no JSON (exit {result.returncode}): {result.stderr}")
        assert result.returncode == 0 and report["success"], json.dumps(report, indent=1)
        return report

    return validate


@pytest.mark.slow
@pytest.mark.parametrize("where", [ROOT, PLUGIN_ROOT], ids=["repository", "package"])
def test_claude_validates_the_marketplace(claude, where: Path) -> None:
    report = claude(where)
    assert report["manifest"]["type"] == "marketplace"
    assert report["manifest"]["errors"] == report["manifest"]["warnings"] == []


@pytest.mark.slow
def test_claude_validates_the_plugin(claude) -> None:
    report = claude(PLUGIN)
    assert report["manifest"]["type"] == "plugin"
    assert report["manifest"]["errors"] == report["manifest"]["warnings"] == []
    provides = report["provides"]
    assert sorted(provides["agents"]) == [f"helix:{a}" for a in sorted(AGENTS)]
    assert sorted(provides["skills"]) == [f"helix:{s}" for s in sorted(SKILLS)]
    hooks = json.loads(HOOKS.read_text(encoding="utf-8"))["hooks"]
    assert {h["event"] for h in provides["hooks"]} == set(hooks)
