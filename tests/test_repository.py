"""git run by helix executes nothing any repository's configuration names.

A builder can write ``.git/config``, a nested repository's or a submodule's
configuration and any ``.gitattributes``; helix runs git outside the builder's
sandbox. Each test plants, in one repository (the project, an untracked nested
repository, a submodule, a gitlink without ``.gitmodules``, or a nested
repository helix is pointed at as the project), every setting that makes git
run a program, each program touching a marker file; runs one path helix runs git
on; finds no marker; then shows that plain git, run the same way at the top and
inside the planted repository, does run what was planted (so the test can fail).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from helix import repository
from helix.loop import judge, scope, worktree
from helix.memory import citations, codelook
from helix.run import landing, review

LOCATIONS = ("top", "nested", "submodule", "gitlink", "nested-as-project")
HOOKS = (
    "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit "
    "prepare-commit-msg commit-msg post-commit pre-rebase post-checkout post-merge "
    "pre-push pre-receive update proc-receive post-receive post-update "
    "reference-transaction push-to-checkout pre-auto-gc post-rewrite "
    "sendemail-validate fsmonitor-watchman post-index-change"
).split()
SIGNATURES = ("PGP SIGNATURE", "SSH SIGNATURE", "SIGNED MESSAGE")  # gpg, ssh, x509
IDENTITY = ("user.name=t", "user.email=t@t")


def plain_env() -> dict[str, str]:
    """A user's git, without the machine's own configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return env


def plain(cwd: Path, *args: str) -> None:
    """Plain git, as a user types it; whatever it runs, runs."""
    subprocess.run(
        ["git", *args], cwd=cwd, env=plain_env(), capture_output=True, stdin=subprocess.DEVNULL
    )


def setup(cwd: Path, *args: str, stdin: bytes = b"") -> str:
    """git for building the fixture (before anything is planted)."""
    settings = [*IDENTITY, "protocol.file.allow=always", "init.defaultBranch=main"]
    done = subprocess.run(
        ["git", *(x for s in settings for x in ("-c", s)), *args],
        cwd=cwd,
        env=plain_env(),
        capture_output=True,
        input=stdin,
        check=True,
    )
    return done.stdout.decode()


def safe(cwd: Path, *args: str) -> None:
    """git once something is planted: helix's own, which the tests check."""
    done = repository.run(cwd, *args, settings=(*IDENTITY, "protocol.file.allow=always"))
    assert done.returncode == 0, done.stderr.decode()


def make_repository(path: Path, name: str) -> None:
    """Files whose attributes select the drivers ``name`` plants, a rename, and
    three commits signed in each format git checks signatures of."""
    path.mkdir(parents=True)
    setup(path, "init", "-q")
    (path / ".gitattributes").write_text(
        f"* filter={name} diff={name} merge={name}\n*.p filter={name}p\n"
    )
    (path / "a.txt").write_text("alpha\n" * 40)
    (path / "x.p").write_text("p\n")
    (path / "code.py").write_text("def findme():\n    return 1\n" + "# line\n" * 40)
    for i in range(len(SIGNATURES)):
        (path / f"r{i}.py").write_text(f"# {i}\n" + "# filler\n" * 40)
    setup(path, "add", ".")
    setup(path, "commit", "-qm", "start")
    setup(path, "mv", "code.py", "moved.py")
    setup(path, "commit", "-qm", "rename")
    for i, kind in enumerate(SIGNATURES):
        setup(path, "mv", f"r{i}.py", f"s{i}.py")
        setup(path, "commit", "-qm", f"signed rename {kind}")
        head, _, message = setup(path, "cat-file", "commit", "HEAD").partition("\n\n")
        signed = f"{head}\ngpgsig -----BEGIN {kind}-----\n AAAA\n -----END {kind}-----\n\n{message}"
        sha = setup(path, "hash-object", "-t", "commit", "-w", "--stdin", stdin=signed.encode())
        setup(path, "update-ref", "HEAD", sha.strip())


@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a submodule (``sub``), a gitlink without ``.gitmodules``
    (``link``) and an untracked nested repository (``nested``); nothing planted."""
    base = tmp_path_factory.mktemp("pristine")
    root = base / "p"
    make_repository(root, "top")
    make_repository(base / "inner", "submodule")
    setup(root, "submodule", "add", "-q", str(base / "inner"), "sub")
    make_repository(root / "link", "gitlink")
    setup(root, "add", "link")
    setup(root, "commit", "-qm", "sub and link")
    make_repository(root / "nested", "nested")
    return root


@dataclass
class Project:
    """A copy of the pristine project; ``markers``: what planted programs touch;
    ``bin``: the planted programs."""

    root: Path
    markers: Path
    bin: Path

    def repo(self, location: str) -> Path:
        """The worktree of the repository at ``location``."""
        folder = {"submodule": "sub", "gitlink": "link", "top": ""}.get(location, "nested")
        return self.root / folder

    def gitdir(self, location: str) -> Path:
        if location == "submodule":
            return self.root / ".git" / "modules" / "sub"
        return self.repo(location) / ".git"

    def plant(self, location: str, gitdir: Path | None = None, name: str | None = None) -> None:
        """Every setting that makes git run a program, in the configuration of the
        repository at ``location``; each program touches ``<name>.<setting>``."""
        name = name or planted_name(location)
        gitdir = gitdir or self.gitdir(location)
        hooks = self.bin / f"hooks-{name}"
        for folder in (hooks, gitdir / "hooks"):
            folder.mkdir(parents=True, exist_ok=True)
            for hook in HOOKS:
                self.program(folder / hook, f"{name}.hook-{hook}")
        settings = {
            "core.fsmonitor": self.program(self.bin / f"{name}-fsmonitor"),
            f"filter.{name}.clean": self.program(self.bin / f"{name}-clean"),
            f"filter.{name}.smudge": self.program(self.bin / f"{name}-smudge"),
            f"filter.{name}p.process": self.program(self.bin / f"{name}-process", done=True),
            f"diff.{name}.textconv": self.program(self.bin / f"{name}-textconv"),
            f"diff.{name}.command": self.program(self.bin / f"{name}-diffcommand"),
            f"merge.{name}.driver": self.program(self.bin / f"{name}-mergedriver"),
            "diff.external": self.program(self.bin / f"{name}-diffexternal"),
            "core.pager": self.program(self.bin / f"{name}-pager"),
            "core.editor": self.program(self.bin / f"{name}-editor"),
            "sequence.editor": self.program(self.bin / f"{name}-sequence-editor"),
            "core.hooksPath": str(hooks),
            "core.alternateRefsCommand": self.program(self.bin / f"{name}-alternaterefs"),
            "core.sshCommand": self.program(self.bin / f"{name}-ssh"),
            "core.askPass": self.program(self.bin / f"{name}-askpass"),
            "credential.helper": "!" + self.program(self.bin / f"{name}-credential"),
            "uploadpack.packObjectsHook": self.program(self.bin / f"{name}-packobjects"),
            "gpg.program": self.program(self.bin / f"{name}-gpg"),
            "gpg.ssh.program": self.program(self.bin / f"{name}-gpgssh"),
            "gpg.x509.program": self.program(self.bin / f"{name}-gpgx509"),
            "gpg.ssh.allowedSignersFile": os.devnull,
            "log.showSignature": "true",
            "merge.verifySignatures": "true",
            "commit.gpgSign": "true",
            "merge.renormalize": "true",
            "submodule.recurse": "true",
            "fetch.recurseSubmodules": "true",
            "diff.ignoreSubmodules": "none",
            "status.submoduleSummary": "true",
            "core.untrackedCache": "true",
            "gc.auto": "1",
            "maintenance.auto": "true",
        }
        lines = []
        for key, value in settings.items():
            section, _, rest = key.partition(".")
            middle, _, variable = rest.rpartition(".")
            lines.append(f'[{section} "{middle}"]' if middle else f"[{section}]")
            lines.append(f'\t{variable} = "{value}"')
        with open(gitdir / "config", "a") as config:
            config.write("\n".join(lines) + "\n")

    def program(self, path: Path, marker: str | None = None, done: bool = False) -> str:
        """A program that touches its marker, then passes its input on."""
        marker = marker or path.name.replace("-", ".", 1)
        rest = "exit 0" if done else 'exec cat "$@"'
        path.write_text(f"#!/bin/sh\ntouch {self.markers / marker}\n{rest}\n")
        path.chmod(0o755)
        return str(path)

    def fired(self) -> list[str]:
        found = sorted(p.name for p in self.markers.iterdir())
        for marker in self.markers.iterdir():
            marker.unlink()
        return found

    def dirty(self) -> None:
        """A changed and a new file in every repository; each file's stat is new too
        (the copy), so git must read contents through the filters to compare."""
        for location in ("top", "submodule", "gitlink", "nested"):
            (self.repo(location) / "a.txt").write_text("changed\n")
            (self.repo(location) / "new.txt").write_text("new\n")


@pytest.fixture
def project(pristine: Path, tmp_path: Path) -> Project:
    root = tmp_path / "p"
    shutil.copytree(pristine, root, symlinks=True)
    made = Project(root, tmp_path / "markers", tmp_path / "bin")
    made.markers.mkdir()
    made.bin.mkdir()
    return made


def planted_name(location: str) -> str:
    """The name the markers of what was planted at ``location`` start with."""
    return {"nested-as-project": "nested", "project": "top", "copy": "top"}.get(location, location)


def where_helix_looks(project: Project, location: str) -> Path:
    """The project helix is given: the nested repository itself for a hook
    started inside it (its own ``.helix``), else the top."""
    return project.repo("nested") if location == "nested-as-project" else project.root


def assert_plain_git_runs_it(project: Project, location: str, *commands: Iterable[str]) -> None:
    """Control: the same commands, as plain git at the top and inside the planted
    repository, run what was planted there."""
    for args in commands:
        for cwd in (where_helix_looks(project, location), project.repo(location)):
            plain(cwd, *args)
    assert [m for m in project.fired() if m.startswith(planted_name(location) + ".")], "nothing ran"


@pytest.mark.parametrize("location", LOCATIONS)
def test_the_tree_digest_and_the_scope_baseline(project: Project, location: str) -> None:
    project.plant(location)
    project.dirty()
    here = where_helix_looks(project, location)
    judge.tree(here)
    baseline = scope.take(["a.txt"], None, here)
    safe(here, "commit", "-q", "--allow-empty", "-m", "the attempt")
    scope.changed(baseline or {}, here)
    assert project.fired() == []
    assert_plain_git_runs_it(project, location, ["status"])


@pytest.mark.parametrize("location", LOCATIONS)
def test_a_checkpoint_and_its_revert(project: Project, location: str, tmp_path: Path) -> None:
    project.plant(location)
    project.dirty()
    here = where_helix_looks(project, location)
    point = worktree.Checkpoint.take(here, tmp_path / "saved")
    (here / "a.txt").write_text("the attempt's change\n")
    (here / "x.p").write_text("the attempt's change\n")
    (here / "made.txt").write_text("made\n")
    safe(here, "add", "made.txt")
    (here / "moved.py").write_text("committed by the attempt\n")
    safe(here, "commit", "-q", "-m", "the attempt", "moved.py")
    point.changes()
    point.revert()  # checkout from HEAD (smudge), unstaging made.txt, a commit's diff
    assert project.fired() == []
    assert_plain_git_runs_it(project, location, ["status"], ["checkout", "HEAD", "--", "a.txt"])


@pytest.mark.parametrize("location", LOCATIONS)
def test_the_citation_lookups_of_the_hooks(project: Project, location: str) -> None:
    project.plant(location)
    project.dirty()
    here = where_helix_looks(project, location)
    codelook.forget()
    lookups = codelook.Lookups(here)
    assert lookups.renamed("code.py") == "moved.py"
    assert lookups.where("findme") == ["moved.py"]
    lookups.find_all(["findme", "alpha"])
    assert citations.extract(here, "call findme() first")[0].path == "moved.py"
    assert project.fired() == []
    renames = ["log", "-M", "--diff-filter=R", "--name-status", "--format="]
    assert_plain_git_runs_it(project, location, renames, ["grep", "-l", "findme"])


@pytest.mark.parametrize("location", LOCATIONS)
def test_the_review_commit_lookup(project: Project, location: str) -> None:
    project.plant(location)
    here = where_helix_looks(project, location)
    assert len(review._commits_naming(here, ["signed rename"])) == len(SIGNATURES)
    assert project.fired() == []
    lookup = ["log", "-20", "--format=%h %s", "--fixed-strings", "--grep=signed rename"]
    assert_plain_git_runs_it(project, location, lookup)


@pytest.mark.parametrize("location", LOCATIONS)
def test_the_identity_is_the_users_and_runs_nothing(
    project: Project, location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = A User\n\temail = a@user\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))  # a caller's: ignored
    project.plant(location)
    here = where_helix_looks(project, location)
    assert landing.Identity.of(here) == landing.Identity("A User", "a@user")
    assert project.fired() == []
    assert_plain_git_runs_it(project, location, ["status"])


WORKER_LOCATIONS = ("project", "copy", "nested", "submodule")


@pytest.mark.parametrize("location", WORKER_LOCATIONS)
def test_a_workers_commits_and_landings(project: Project, location: str, tmp_path: Path) -> None:
    """``helix run --workers``: the configuration planted in the project, in the
    worker's copy, in a repository the builder made in its copy (a gitlink once
    committed) or in the project's submodule checked out in the copy."""
    root, copy = project.root, tmp_path / "copy"
    shutil.rmtree(root / "nested")  # the project must be clean
    if location == "project":
        project.plant("top")
    target = landing.check_project(root)
    identity = landing.Identity.of(root)
    landing.add_worktree(root, copy, "helix/w1", target)
    planted = copy
    if location == "copy":
        project.plant("top", copy / ".git")  # the drivers its checkout's attributes name
    elif location == "nested":
        planted = copy / "nested"
        make_repository(planted, "nested")
        project.plant("nested", planted / ".git")
    elif location == "submodule":
        safe(copy, "submodule", "update", "-q", "--init", "sub")
        planted = copy / "sub"
        project.plant("submodule", copy / ".git" / "modules" / "sub")
    for folder in {copy, planted}:
        (folder / "a.txt").write_text("the worker's\n")
        (folder / "x.p").write_text("the worker's\n")
    landing.commit_all(copy, "one\n", identity)  # a nested repository becomes a gitlink
    (copy / "b.txt").write_text("two\n")
    # The same size and a new time: git must read it (through the filters) to tell.
    (planted / "moved.py").write_text((planted / "moved.py").read_text().upper())
    os.utime(planted / "moved.py", (time.time() + 100, time.time() + 100))
    landing.commit_all(copy, "two\n", identity)
    assert landing.land(root, copy, target, tmp_path / "lock", identity, "helix/kept-1").ok
    (root / "a.txt").write_text("the user's\n")
    safe(root, "commit", "-q", "-m", "the user's", "a.txt")
    (copy / "a.txt").write_text("the worker's, conflicting\n")
    landing.commit_all(copy, "three\n", identity)
    assert not landing.land(root, copy, target, tmp_path / "lock", identity, "helix/kept-2").ok
    landing.catch_up(root, copy, target, identity)
    (copy / "c.txt").write_text("unfinished\n")
    landing.set_aside_unfinished(root, copy, "unfinished\n", identity, "helix/unfinished")
    landing.tasks_ahead(root, copy, target)
    landing.unlanded(root, "helix/kept-2", target)
    landing.branches(root, "helix/")
    landing.switch(root, copy, "helix/w2", target)
    landing.delete_branch(root, "helix/kept-2")
    landing.prune(root)
    assert project.fired() == []
    for args in (["status"], ["add", "-A"]):
        plain(root, *args)
        plain(copy, *args)
        plain(planted, *args)
    assert [m for m in project.fired() if m.startswith(planted_name(location) + ".")]


@pytest.mark.parametrize(
    "args",
    [
        ("log", "-p", "-1", "--", "a.txt"),
        ("log", "-p", "-1", "--no-textconv", "--no-ext-diff", "--textconv", "--", "a.txt"),
        ("grep", "--textconv", "-e", "alpha"),
        ("cat-file", "--textconv", "HEAD:a.txt"),
        ("cat-file", "--filters", "HEAD:a.txt"),
        ("diff", "HEAD~5", "--", "a.txt"),
    ],
)
def test_a_command_that_could_hand_content_to_a_driver_runs_none(
    project: Project, args: tuple[str, ...]
) -> None:
    """The drivers are read for every command but those that cannot use them."""
    project.plant("top")
    (project.root / "a.txt").write_text("changed\n")
    repository.run(project.root, *args)
    assert project.fired() == []
    plain(project.root, *args)
    fired = project.fired()
    assert {"top.textconv", "top.smudge", "top.diffexternal"} & set(fired), fired


def test_the_lookups_of_the_hooks_start_one_git_each(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``git config --list`` before them (their options keep every driver
    out): each lookup a hook makes is one git process."""
    project.plant("top")
    started, traced = tmp_path / "started", tmp_path / "traced"
    traced.mkdir()
    (traced / "git").write_text(
        f'#!/bin/sh\necho "$1" >> {started}\nexec {shutil.which("git")} "$@"\n'
    )
    (traced / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{traced}{os.pathsep}{os.environ['PATH']}")
    codelook.forget()
    lookups = codelook.Lookups(project.root)
    assert lookups.renamed("code.py") == "moved.py"
    assert lookups.where("findme") == ["moved.py"]
    assert started.read_text().split() == ["--no-pager", "--no-pager"]
    assert project.fired() == []


def test_callers_git_variables_are_ignored(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = project.root.parent / "other"
    other.mkdir()
    setup(other, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    top = repository.run(project.root, "rev-parse", "--show-toplevel").stdout.decode().strip()
    assert Path(top).resolve() == project.root.resolve()


def test_only_git_config_reads_the_users_configuration(project: Project) -> None:
    with pytest.raises(ValueError):
        repository.run(project.root, "status", user_config=True)
