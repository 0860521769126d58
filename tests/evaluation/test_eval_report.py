"""Reports in a real headless browser (Debian's chromium over the DevTools protocol): each page
renders, shows its figures decoded, loads nothing external and logs no console errors."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eval_envs import ADD_ID, FLAKY_ID, GUESS_ID, add_policy, bisect_policy

from llmgym import error
from llmgym.evaluation import evaluate
from llmgym.evaluation import report as rp
from llmgym.evaluation.compare import compare_runs, comparison_html

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


# --- a minimal DevTools-protocol client (stdlib only) ------------------------------------------------


class DevTools:
    """One page target of a headless chromium, driven over a WebSocket."""

    def __init__(self, ws_url: str):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", ws_url)
        assert m, ws_url
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, "DevTools closed the connection during the handshake"
            head += chunk
        assert head.startswith(b"HTTP/1.1 101"), head[:200]
        self._buf = head.split(b"\r\n\r\n", 1)[1]
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send(self, payload: bytes) -> None:
        header = bytearray([0x81])
        n = len(payload)
        if n < 126:
            header.append(0x80 | n)
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(
            bytes(header) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        )

    def _message(self) -> dict[str, Any]:
        data = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode in (0x9, 0xA):  # ping/pong
                continue
            data += payload
            if b0 & 0x80:
                return json.loads(data)  # type: ignore[no-any-return]

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self._send(json.dumps({"id": self._id, "method": method, "params": params}).encode())
        while True:
            msg = self._message()
            if msg.get("id") == self._id:
                assert "error" not in msg, msg
                return msg.get("result", {})  # type: ignore[no-any-return]
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for i, msg in enumerate(self.events):
            if msg.get("method") == method:
                return self.events.pop(i)
        while time.monotonic() < deadline:
            msg = self._message()
            if msg.get("method") == method:
                return msg
            self.events.append(msg)
        raise TimeoutError(method)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if exe is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (CI installs it in .ci/run)")
    profile = tempfile.mkdtemp(prefix="llmgym-chromium-")
    proc = subprocess.Popen(
        [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
            "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])

        def open_page(path: Path, extra: str | None = None) -> dict[str, Any]:
            """Load ``path`` and probe it; ``extra``: a JS expression whose JSON-able value
            comes back as ``result["extra"]``."""
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
                targets = json.load(r)
            page = next(t for t in targets if t.get("type") == "page")
            tools = DevTools(page["webSocketDebuggerUrl"])
            try:
                for domain in ("Page", "Runtime", "Log"):
                    tools.call(f"{domain}.enable")
                tools.events.clear()  # enabling replays what an earlier page logged
                tools.call("Page.navigate", url=path.resolve().as_uri())
                tools.wait_for("Page.loadEventFired")
                probe = tools.call(
                    "Runtime.evaluate",
                    returnByValue=True,
                    expression="""JSON.stringify({
                        title: document.title,
                        h1: document.querySelector('h1') && document.querySelector('h1').textContent,
                        tables: document.querySelectorAll('table').length,
                        images: Array.from(document.images).map(i => ({
                            complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
                            shown: i.getBoundingClientRect().width, src: i.src.slice(0, 22)})),
                        resources: performance.getEntriesByType('resource').map(e => e.name),
                        height: document.body.scrollHeight})""",
                )
                more = None
                if extra is not None:
                    more = tools.call(
                        "Runtime.evaluate",
                        returnByValue=True,
                        expression=f"JSON.stringify({extra})",
                    )["result"]["value"]
                time.sleep(0.2)  # let late console messages arrive
                tools.call("Runtime.evaluate", expression="1")
                errors = [
                    e
                    for e in tools.events
                    if e.get("method") == "Runtime.exceptionThrown"
                    or (
                        e.get("method") == "Runtime.consoleAPICalled"
                        and e["params"]["type"] in ("error", "assert")
                    )
                    or (
                        e.get("method") == "Log.entryAdded"
                        and e["params"]["entry"]["level"] == "error"
                    )
                ]
                result = {**json.loads(probe["result"]["value"]), "errors": errors}
                if more is not None:
                    result["extra"] = json.loads(more)
                return result
            finally:
                tools.close()

        yield open_page
    finally:
        proc.kill()
        proc.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)


def _check_page(result: dict[str, Any], *, min_images: int, title: str) -> None:
    assert result["errors"] == [], result["errors"]
    assert title in result["title"] and title in (result["h1"] or "")
    assert result["tables"] >= 1
    assert len(result["images"]) >= min_images
    for img in result["images"]:
        assert img["complete"] and img["w"] > 0 and img["h"] > 0, img  # decoded
        assert img["shown"] > 0, img  # laid out on the page
        assert img["src"].startswith("data:image/png;base64")
    assert result["resources"] == []  # nothing loaded from outside the file
    assert result["height"] > 500


def _self_contained(text: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:|#)""", text), "external asset"
    assert "<script" not in text


@pytest.fixture(scope="module")
def eval_runs(tmp_path_factory: Any) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("evals")

    def mixed(messages: Any, tools: Any) -> str:
        if "Guess" in messages[0]["content"]:
            return bisect_policy(messages, tools) if len(messages) < 6 else "-5"
        if "+ 1?" in messages[-1]["content"]:
            raise RuntimeError("flaky <script>alert(1)</script>")
        return add_policy(messages, tools)

    a = root / "a"
    evaluate([GUESS_ID, ADD_ID], mixed, out=a, episodes=8, samples=3, progress=False)
    b = root / "b"
    evaluate([GUESS_ID, ADD_ID], "oracle", out=b, episodes=8, samples=3, progress=False)
    return a, b


@pytest.mark.slow
def test_the_eval_report_renders_in_a_browser(browser: Any, eval_runs: tuple[Path, Path]) -> None:
    path = eval_runs[0] / "report.html"
    text = path.read_text()
    _self_contained(text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # transcripts and errors are escaped
    for heading in (
        "Per environment",
        "Per family",
        "Per difficulty",
        "Sandbox",
        "Provenance",
        "pass@3",
    ):
        assert heading in text
    result = browser(path)
    # success/reward, difficulty, pass@k, reward histograms, families, sandbox, turns
    _check_page(result, min_images=7, title="llmgym evaluation")


@pytest.mark.slow
def test_the_training_report_renders_in_a_browser(browser: Any, tmp_path: Path) -> None:
    rows = []
    for step in range(1, 61):
        rows.append(
            json.dumps(
                {
                    "step": step,
                    "time": 1.7e9 + step,
                    "rewards/math": step / 60,
                    "rewards/coding": (step % 7) / 7,
                    "success/math": step / 80,
                    "kl": 0.01 * step,
                    "entropy": 2.0 - step / 60,
                    "clip_frac": 0.1,
                    "losses/policy": 1 / step,
                    "charts/tokens_per_s": 1000.0 + step,
                    "sandbox/timeout_rate": 0.01,
                    "note": "text is skipped",
                    "flag": True,
                    "bad": None,
                }
            )
        )
    rows.insert(10, "not json at all")
    rows.insert(20, json.dumps([1, 2, 3]))
    rows.append('{"step": 61, "kl": 0.')  # a run killed while writing
    (tmp_path / "metrics.jsonl").write_text("\n".join(rows))
    (tmp_path / "config.json").write_text(json.dumps({"lr": 1e-6, "comment": "<b>bold</b>"}))
    with pytest.warns(UserWarning, match="not a JSON object"):
        path = rp.write_report(tmp_path)
    assert path == tmp_path / "report.html"
    text = path.read_text()
    _self_contained(text)
    for group in ("rewards", "success", "losses", "charts", "sandbox", "misc"):
        assert f"<h2>{group}</h2>" in text
    assert "note" not in re.findall(r"<td>([^<]*)</td>", text)
    assert "&lt;b&gt;bold&lt;/b&gt;" in text
    result = browser(path)
    _check_page(result, min_images=6, title="llmgym training run")


@pytest.mark.slow
def test_the_comparison_page_renders_in_a_browser(
    browser: Any, eval_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    page = tmp_path / "compare.html"
    page.write_text(comparison_html(compare_runs(*eval_runs)))
    _self_contained(page.read_text())
    _check_page(browser(page), min_images=1, title="llmgym comparison")


@pytest.mark.slow
def test_the_browser_check_catches_a_broken_page(browser: Any, tmp_path: Path) -> None:
    # A negative control: the same probe sees a console error, an exception and a bad image.
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>x</title></head><body><h1>x</h1>"
        '<img src="data:image/png;base64,AAAA"><script>console.error("bad");'
        "undefinedFunction();</script></body></html>"
    )
    result = browser(page)
    kinds = {e["method"] for e in result["errors"]}
    assert {"Runtime.consoleAPICalled", "Runtime.exceptionThrown"} <= kinds
    assert result["images"][0]["w"] == 0
    with pytest.raises(AssertionError):
        _check_page(result, min_images=1, title="x")


# --- without a browser --------------------------------------------------------------------------


def test_reports_keep_their_tables_without_matplotlib(
    monkeypatch: pytest.MonkeyPatch, eval_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    monkeypatch.setattr(rp, "have_matplotlib", lambda: False)
    path = rp.write_eval_report(eval_runs[0], tmp_path / "plain.html")
    text = path.read_text()
    assert "<img" not in text and "pip install" in text and "Per environment" in text


def test_report_of_an_unfinished_run_is_built_from_its_results(
    monkeypatch: pytest.MonkeyPatch, eval_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    monkeypatch.setattr(rp, "have_matplotlib", lambda: False)  # tables suffice here; faster
    run = tmp_path / "unfinished"
    run.mkdir()
    lines = (eval_runs[0] / "results.jsonl").read_text().splitlines(keepends=True)
    (run / "results.jsonl").write_text("".join(lines[:5]) + lines[5][:40])
    path = rp.write_report(run)
    assert "Per environment" in path.read_text()


def test_report_refuses_a_folder_without_runs(tmp_path: Path) -> None:
    with pytest.raises(error.Error, match="neither an evaluation"):
        rp.write_report(tmp_path)
    with pytest.raises(error.Error, match="no evaluation results"):
        rp.write_eval_report(tmp_path)
    with pytest.raises(error.Error, match="No metrics.jsonl"):
        rp.write_training_report(tmp_path)


def test_training_series_skips_what_is_not_a_number() -> None:
    axis, series = rp.training_series(
        [
            {"global_step": 5, "a": 1, "b": "x", "c": float("nan")},
            {"global_step": 6, "a": 2, "c": 3, "d": True},
            {"a": 4},
        ]
    )
    assert axis == "global_step"
    assert series == {"a": ([5.0, 6.0, 2.0], [1.0, 2.0, 4.0]), "c": ([6.0], [3.0])}
    assert rp.training_series([{"x": 1}, {"x": 2}]) == ("row", {"x": ([0.0, 1.0], [1.0, 2.0])})
    assert rp.training_series([]) == ("row", {})


# --- issue 15: a warning at the top when errors occurred; the training run's hyperparameters ------

_ALERT_PROBE = """(() => {
    const alert = document.querySelector('[role=alert]');
    const first = document.querySelector('.cards');
    const h2s = Array.from(document.querySelectorAll('h2')).map(h => h.getBoundingClientRect().top);
    if (!alert) return {alert: null};
    const box = alert.getBoundingClientRect();
    const style = getComputedStyle(alert);
    return {alert: alert.innerText, top: box.top, width: box.width, height: box.height,
            cardsTop: first.getBoundingClientRect().top, firstH2: Math.min(...h2s),
            background: style.backgroundColor, display: style.display,
            visibility: style.visibility, inView: box.top < window.innerHeight,
            errorsAnchor: !!document.getElementById('errors')};
})()"""


@pytest.fixture(scope="module")
def errored_run(tmp_path_factory: Any) -> Path:
    """An evaluation where the env raises on some tasks and the policy on others."""
    root = tmp_path_factory.mktemp("errored")

    def policy(messages: Any, tools: Any) -> str:
        prompt = messages[-1]["content"]
        if prompt.startswith("say "):
            return prompt.split()[-1]
        if "+ 1?" in prompt:
            raise RuntimeError("the policy server went away")
        return add_policy(messages, tools)

    evaluate([FLAKY_ID, ADD_ID], policy, out=root, episodes=6, progress=False)
    return root


def _status_counts(run: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in (run / "results.jsonl").read_text().splitlines():
        status = json.loads(line)["status"]
        counts[status] = counts.get(status, 0) + 1
    return counts


@pytest.mark.slow
def test_the_eval_report_warns_at_the_top_when_errors_occurred(
    browser: Any, errored_run: Path, eval_runs: tuple[Path, Path]
) -> None:
    counts = _status_counts(errored_run)
    assert counts.get("env_error", 0) > 0 and counts.get("policy_error", 0) > 0, counts
    errored = counts["env_error"] + counts["policy_error"]
    total = sum(counts.values())
    result = browser(errored_run / "report.html", extra=_ALERT_PROBE)
    _check_page(result, min_images=1, title="llmgym evaluation")
    alert = result["extra"]
    assert alert["alert"] is not None, "no warning on a run with errors"
    text = alert["alert"]
    assert f"{errored} of {total} episodes" in text, text
    assert (
        f"{counts['env_error']} env_error" in text
        and f"{counts['policy_error']} policy_error" in text
    )
    # visible, at the top: above the summary cards and every section, in the first screen
    assert alert["display"] != "none" and alert["visibility"] == "visible"
    assert alert["width"] > 300 and alert["height"] > 20
    assert alert["top"] < alert["cardsTop"] and alert["top"] < alert["firstH2"]
    assert alert["inView"] and alert["errorsAnchor"]
    assert alert["background"] not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
    assert "This run failed" in text and "more than 5%" in text  # over max_error_rate
    # and nothing of the kind when every episode finished cleanly
    assert set(_status_counts(eval_runs[1])) == {"ok"}
    clean = browser(eval_runs[1] / "report.html", extra=_ALERT_PROBE)
    assert clean["extra"] == {"alert": None}
    # the mixed run of the other tests has policy errors only, and says so
    mixed = browser(eval_runs[0] / "report.html", extra=_ALERT_PROBE)["extra"]
    n = _status_counts(eval_runs[0])["policy_error"]
    assert mixed["alert"] is not None and f"{n} policy_error" in mixed["alert"]
    assert "env_error" not in mixed["alert"]


def test_the_error_warning_counts_each_kind_of_error() -> None:
    ok = {"status": "ok", "env": "e", "task_id": "t", "reward": 1.0, "success": True}
    records = [
        ok,
        {**ok, "status": "env_error", "error": "RuntimeError: boom", "success": False},
        {**ok, "status": "env_error", "error": "RuntimeError: boom", "success": False},
        {**ok, "status": "policy_error", "error": "timeout", "success": False},
        {**ok, "exec": [{"status": "sandbox_error"}, {"status": "passed"}]},
    ]
    counts = rp.error_counts({}, records)
    assert counts == {
        "episodes": 5,
        "errored": 3,
        "by_status": {"env_error": 2, "policy_error": 1},
        "sandbox_failures": {"sandbox_error": 1},
    }
    page = rp.eval_report_html({"overall": {}}, records)
    alert = page[page.index('role="alert"') : page.index("</div>", page.index('role="alert"'))]
    assert "3 of 5 episodes (60.0%) ended in an error" in alert
    assert "<b>2</b> env_error" in alert and "<b>1</b> policy_error" in alert
    assert "<b>1</b> sandbox executions ended in sandbox_error" in alert
    assert page.index('role="alert"') < page.index('class="cards"')
    # sandbox failures alone still warn; a clean run does not
    only_sandbox = rp.eval_report_html({}, [ok, {**ok, "exec": {"status": "protocol_error"}}])
    assert "sandbox executions failed" in only_sandbox and "protocol_error" in only_sandbox
    assert 'role="alert"' not in rp.eval_report_html({}, [ok, ok])
    # the runner's verdict against max_error_rate, when the summary holds it
    judged = {"errors": {"episodes": 3, "rate": 0.6, "max_rate": 0.05, "exceeded": True}}
    assert "This run failed" in rp.eval_report_html(judged, records)
    assert "more than 5% (max_error_rate)" in rp.eval_report_html(judged, records)
    judged["errors"]["exceeded"] = False
    assert "This run failed" not in rp.eval_report_html(judged, records)
    # no records (a summary only): the summary's status counts
    summary = {"overall": {"episodes": 10, "status": {"ok": 7, "policy_error": 3}}}
    assert rp.error_counts(summary, [])["by_status"] == {"policy_error": 3}
    assert "3 of 10 episodes" in rp.eval_report_html(summary, [])


_CONFIG_YAML = """algo: grpo
model: runs/demo/sft/final
env_id: llm/Math-v0
env_kwargs:
  family: arith.add_small
learning_rate: 1.0e-05
total_steps: 60
group_size: 8
beta: 0.0
loss_type: dapo
note: <b>bold</b>
"""


@pytest.mark.slow
def test_the_training_report_shows_the_hyperparameters_at_the_top(
    browser: Any, tmp_path: Path
) -> None:
    (tmp_path / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "losses/policy": 1 / s, "rewards/mean": s / 30}) + "\n"
            for s in range(1, 31)
        )
    )
    (tmp_path / "config.yaml").write_text(_CONFIG_YAML)
    path = rp.write_report(tmp_path)
    text = path.read_text()
    _self_contained(text)
    assert "&lt;b&gt;bold&lt;/b&gt;" in text
    probe = """(() => {
        const h = document.getElementById('hyperparameters');
        const table = h.nextElementSibling.nextElementSibling;
        const rows = Array.from(table.querySelectorAll('tbody tr')).map(
            tr => Array.from(tr.cells).map(c => c.innerText));
        const curves = Array.from(document.querySelectorAll('h2')).filter(
            x => x.id !== 'hyperparameters').map(x => x.getBoundingClientRect().top);
        return {top: h.getBoundingClientRect().top, rows: rows, firstCurves: Math.min(...curves),
                shown: table.getBoundingClientRect().height,
                cards: document.querySelector('.cards').innerText};
    })()"""
    result = browser(path, extra=probe)
    _check_page(result, min_images=2, title="llmgym training run")
    info = result["extra"]
    rows = dict(info["rows"])
    assert rows["algo"] == "grpo" and rows["learning_rate"] == "1e-05"
    assert rows["group_size"] == "8" and rows["env_kwargs"] == '{"family": "arith.add_small"}'
    assert [r[0] for r in info["rows"]][:6] == [
        "algo", "model", "env_id", "learning_rate", "total_steps", "env_kwargs",
    ]  # fmt: skip
    assert info["shown"] > 100 and info["top"] < info["firstCurves"]
    assert "grpo" in info["cards"] and "runs/demo/sft/final" in info["cards"]


def test_the_training_report_says_when_the_config_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(rp, "have_matplotlib", lambda: False)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "kl": 0.1}\n')
    assert "No config.yaml" in rp.write_report(tmp_path).read_text()
    (tmp_path / "config.yaml").write_text("algo: ppo\nlearning_rate: 3.0e-04\n")
    text = rp.write_report(tmp_path).read_text()
    assert "No config.yaml" not in text and "<td>learning_rate</td><td>0.0003</td>" in text
