"""A secret without a vendor prefix: a long hex or base64 key right after a
word that names it (key, token, secret, password...). Refused by the one safety
screen on every way in, here `helix memory store` and the hook that stores a
builder's INSIGHT; a commit sha or a colour in ordinary advice is still stored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_hooks import Session, builder_prompt

HEX = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
B64 = "QmFzZTY0U2VjcmV0S2V5VmFsdWVIZXJl"

SECRETS = {
    "upper-hex-assigned": f"When calling billing from CI, export BILLING_KEY={HEX.upper()} first",
    "arrow": f"When calling billing from CI, the access token -> {HEX} works",
    "flag": f"When calling billing from CI, pass --api-key {HEX} to the client",
    "parenthesised": f"When signing webhooks, the hmac key ({HEX}) signs each request",
    "header-word": f"When calling billing from CI, add the header X-Auth {HEX} to requests",
    "numbered": f"When calling billing from CI: password 1: {HEX} then retry",
    "base64-flag": f"When calling billing from CI, pass --token {B64} to the client",
}
BENIGN = {
    "commit-sha": f"When bisecting the key rotation bug, commit {HEX}f1e2d3c4 is the first bad one",
    "colour": "When theming the key buttons, use colour #1a2b3c because it contrasts with the header",
    "identifier": "When signing requests, the key id kid-2024-01-15-rotation-primary must match JWKS",
    "short-id": "When signing requests, the key id 9f8e7d6c5b4a3928 must match the JWKS entry",
}


def helix(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"HELIX_HOME": str(home), "HELIX_EMBEDDER": "hash", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def stored(home: Path) -> str:
    done = helix(home, "memory", "export", "-")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("text", list(SECRETS.values()), ids=list(SECRETS))
def test_store_refuses_a_keyed_secret(tmp_path: Path, text: str) -> None:
    home = tmp_path / ".helix"
    done = helix(home, "memory", "store", "--content", text)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("helix: error: ") and "safety screen" in line, line
    assert HEX not in line and HEX.upper() not in line and B64 not in line  # never echoed
    assert HEX not in stored(home) and B64 not in stored(home)


@pytest.mark.parametrize("text", list(BENIGN.values()), ids=list(BENIGN))
def test_store_keeps_ordinary_advice(tmp_path: Path, text: str) -> None:
    home = tmp_path / ".helix"
    done = helix(home, "memory", "store", "--content", text)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "added"
    assert text in stored(home)


def test_the_hook_refuses_a_builders_keyed_secret(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.env["HELIX_EMBEDDER"] = "hash"
    session.spawn("toolu_k", "helix:builder", builder_prompt("hx-000000ab", "Add billing"))
    session.start("k1", "helix:builder")
    lines = [
        f"INSIGHT: {json.dumps({'content': SECRETS['flag'], 'tags': []})}",
        f"INSIGHT: {json.dumps({'content': SECRETS['base64-flag'], 'tags': []})}",
        f"INSIGHT: {json.dumps({'content': BENIGN['commit-sha'], 'tags': []})}",
    ]
    session.stop("k1", "helix:builder", "DELIVERED: ok\n" + "\n".join(lines) + "\n", "toolu_k")
    with session.memory() as memory:
        contents = [i["content"] for i in memory.list(limit=100)]
    assert BENIGN["commit-sha"] in contents  # the hook did store what was fine
    assert not any(HEX in c and "api-key" in c or B64 in c for c in contents), contents
