"""A virtual file system in SQLite: directories and files with owners, sizes and text contents."""

from __future__ import annotations

import posixpath
import random
import sqlite3
from typing import Any

from llmgym.envs.tools.scenario import (
    Module,
    Planner,
    Rule,
    ToolError,
    family,
    one,
    people,
)

MAX_CONTENT = 10_000
SCHEMA = """
CREATE TABLE nodes (path TEXT PRIMARY KEY, kind TEXT NOT NULL, content TEXT NOT NULL, owner TEXT NOT NULL);
"""
EXTS = (".log", ".txt", ".csv", ".tmp", ".pdf")
STEMS = ("report", "build", "notes", "export", "backup", "trace", "draft", "summary")


def _norm(path: str) -> str:
    path = path.strip()
    if not path.startswith("/"):
        raise ToolError(f"paths are absolute, got {path!r}")
    return posixpath.normpath(path)


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    def add(path: str, kind: str, content: str = "", owner: str = "root") -> None:
        db.execute("INSERT INTO nodes VALUES (?, ?, ?, ?)", (path, kind, content, owner))

    for d in ("/", "/home", "/system", "/system/config", "/shared"):
        add(d, "dir")
    add("/system/config/app.conf", "file", "mode=production\n")
    users = sorted({p[0].lower() for p in people(db_seed)[:6]})
    for user in users:
        home = f"/home/{user}"
        add(home, "dir", owner=user)
        for sub in ("downloads", "docs"):
            add(f"{home}/{sub}", "dir", owner=user)
            for name in rng.sample(STEMS, 4):
                ext = rng.choice(EXTS)
                add(f"{home}/{sub}/{name}{ext}", "file", "x" * rng.randrange(10, 4000), user)


def _node(db: sqlite3.Connection, path: str) -> sqlite3.Row:
    row = one(db, "SELECT * FROM nodes WHERE path = ?", (_norm(path),))
    if row is None:
        raise ToolError(f"no such file or directory: {path}")
    return row


def _children(db: sqlite3.Connection, path: str) -> list[sqlite3.Row]:
    prefix = path.rstrip("/") + "/"
    return [
        r
        for r in db.execute(
            "SELECT * FROM nodes WHERE substr(path, 1, ?) = ? ORDER BY path", (len(prefix), prefix)
        )
        if "/" not in r["path"][len(prefix) :]
    ]


def list_dir(db: sqlite3.Connection, path: str) -> list[dict[str, Any]]:
    """Entries of a directory: name, kind and size in bytes.

    Args:
        path: Absolute directory path.
    """
    d = _node(db, path)
    if d["kind"] != "dir":
        raise ToolError(f"{path} is not a directory")
    return [
        {"name": posixpath.basename(r["path"]), "kind": r["kind"], "size": len(r["content"])}
        for r in _children(db, d["path"])
    ]


def read_file(db: sqlite3.Connection, path: str) -> dict[str, Any]:
    """Contents of a text file (first 2000 characters).

    Args:
        path: Absolute file path.
    """
    f = _node(db, path)
    if f["kind"] != "file":
        raise ToolError(f"{path} is a directory")
    return {"path": f["path"], "size": len(f["content"]), "content": f["content"][:2000]}


def write_file(db: sqlite3.Connection, path: str, content: str) -> dict[str, Any]:
    """Create or overwrite a text file; its directory must exist.

    Args:
        path: Absolute file path.
        content: Full text of the file (at most 10000 characters).
    """
    p = _norm(path)
    if len(content) > MAX_CONTENT:
        raise ToolError(f"content is over {MAX_CONTENT} characters")
    parent = _node(db, posixpath.dirname(p))
    if parent["kind"] != "dir":
        raise ToolError("the parent is not a directory")
    existing = one(db, "SELECT kind FROM nodes WHERE path = ?", (p,))
    if existing is not None and existing["kind"] == "dir":
        raise ToolError(f"{p} is a directory")
    db.execute(
        "INSERT INTO nodes VALUES (?, 'file', ?, ?) ON CONFLICT (path) DO UPDATE SET content = excluded.content",
        (p, content, parent["owner"]),
    )
    return {"path": p, "size": len(content)}


def make_dir(db: sqlite3.Connection, path: str) -> dict[str, Any]:
    """Create a directory; its parent must exist.

    Args:
        path: Absolute directory path.
    """
    p = _norm(path)
    if one(db, "SELECT 1 FROM nodes WHERE path = ?", (p,)):
        raise ToolError(f"{p} already exists")
    parent = _node(db, posixpath.dirname(p))
    if parent["kind"] != "dir":
        raise ToolError("the parent is not a directory")
    db.execute("INSERT INTO nodes VALUES (?, 'dir', '', ?)", (p, parent["owner"]))
    return {"path": p, "created": True}


def move(db: sqlite3.Connection, source: str, destination: str) -> dict[str, Any]:
    """Move or rename a file (not a directory). A destination that is a directory receives the file.

    Args:
        source: Absolute path of the file.
        destination: New absolute path, or a directory to move it into.
    """
    f = _node(db, source)
    if f["kind"] != "file":
        raise ToolError("only files can be moved")
    dst = _norm(destination)
    target = one(db, "SELECT kind FROM nodes WHERE path = ?", (dst,))
    if target is not None and target["kind"] == "dir":
        dst = posixpath.join(dst, posixpath.basename(f["path"]))
    elif target is not None:
        raise ToolError(f"{dst} already exists")
    if one(db, "SELECT 1 FROM nodes WHERE path = ?", (dst,)):
        raise ToolError(f"{dst} already exists")
    _node(db, posixpath.dirname(dst))
    db.execute("UPDATE nodes SET path = ? WHERE path = ?", (dst, f["path"]))
    return {"from": f["path"], "to": dst}


def delete(db: sqlite3.Connection, path: str) -> dict[str, Any]:
    """Delete a file or an empty directory.

    Args:
        path: Absolute path.
    """
    n = _node(db, path)
    if n["path"] == "/":
        raise ToolError("cannot delete /")
    if n["kind"] == "dir" and _children(db, n["path"]):
        raise ToolError(f"{n['path']} is not empty")
    db.execute("DELETE FROM nodes WHERE path = ?", (n["path"],))
    return {"deleted": n["path"]}


def _system_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    touched = [
        args.get(k) for k in ("path", "source", "destination") if isinstance(args.get(k), str)
    ]
    if name in ("write_file", "make_dir", "move", "delete"):
        for p in touched:
            norm = posixpath.normpath(p.strip()) if p.strip().startswith("/") else ""
            if norm == "/system" or norm.startswith("/system/"):
                return f"{name} touched {norm}"
    return None


MODULE = Module(
    "files",
    SCHEMA,
    seed,
    (list_dir, read_file, write_file, make_dir, move, delete),
    {"nodes": "SELECT path, kind, content FROM nodes"},
    (
        Rule(
            "files_system",
            "Never create, change, move or delete anything under /system.",
            _system_rule,
        ),
    ),
)


def _organize(p: Planner) -> str:
    users = [
        r["path"].split("/")[2]
        for r in p.q(
            "SELECT path FROM nodes WHERE path LIKE '/home/%' AND kind = 'dir' "
            "AND path NOT LIKE '/home/%/%' ORDER BY path"
        )
    ]
    for _ in range(50):
        user = p.choose(users)
        ext = p.rng.choice((".log", ".txt", ".csv"))
        src = f"/home/{user}/downloads"
        files = [
            r
            for r in p.q(
                "SELECT path, length(content) AS size FROM nodes WHERE path LIKE ? ORDER BY path",
                (src + "/%",),
            )
            if r["path"].endswith(ext)
        ]
        if files:
            break
    threshold = p.rng.choice((200, 500, 1000)) if p.difficulty >= 0.4 else 0
    chosen = [f for f in files if f["size"] > threshold]
    dest = f"/home/{user}/archive"
    p.call("list_dir", path=src)
    p.call("make_dir", path=dest)
    with p.parallel():
        for f in chosen:
            p.call("move", source=f["path"], destination=dest)
    ask = f"In {src}, move every {ext} file"
    ask += f" larger than {threshold} bytes" if threshold else ""
    ask += f" into a new directory {dest}."
    if p.difficulty >= 0.7:
        tmp = [
            r["path"]
            for r in p.q("SELECT path FROM nodes WHERE path LIKE ? ORDER BY path", (src + "/%",))
            if r["path"].endswith(".tmp")
        ]
        with p.parallel():
            for t in tmp:
                p.call("delete", path=t)
        ask += " Also delete the .tmp files in the downloads folder."
    p.fact(sum(f["size"] for f in chosen))
    return ask + " Tell me the total size in bytes of the files you moved."


def _notes(p: Planner) -> str:
    users = [
        r["path"].split("/")[2]
        for r in p.q(
            "SELECT path FROM nodes WHERE path LIKE '/home/%' AND kind = 'dir' "
            "AND path NOT LIKE '/home/%/%' ORDER BY path"
        )
    ]
    user = p.choose(users)
    docs = f"/home/{user}/docs"
    files = p.q(
        "SELECT path, length(content) AS size FROM nodes WHERE path LIKE ? AND kind = 'file' ORDER BY path",
        (docs + "/%",),
    )
    p.call("list_dir", path=docs)
    lines = [f"{f['path'].rsplit('/', 1)[1]} {f['size']}" for f in files]
    content = "\n".join(lines) + "\n"
    p.call("write_file", path=f"{docs}/index.txt", content=content)
    if p.difficulty >= 0.5:
        p.call("move", source=f"{docs}/index.txt", destination="/shared")
        where = "/shared/index.txt"
    else:
        where = f"{docs}/index.txt"
    biggest = max(files, key=lambda f: (f["size"], f["path"]))
    p.fact(biggest["path"].rsplit("/", 1)[1])
    return (
        f"Write an index of {docs}: a file {docs}/index.txt listing each file in that directory (before the index "
        "exists) as '<name> <size in bytes>', one per line in name order, ending with a newline."
        + (" Then move the index into /shared." if where != f"{docs}/index.txt" else "")
        + " Tell me the name of the largest file."
    )


FAMILIES = [
    family(
        "files_organize",
        ["files"],
        _organize,
        "Archive files by extension and size; clean temp files.",
        distractor_modules=["warehouse", "library"],
    ),
    family(
        "files_index",
        ["files"],
        _notes,
        "Write a directory index file with exact contents.",
        distractor_modules=["kb", "hr"],
    ),
]
