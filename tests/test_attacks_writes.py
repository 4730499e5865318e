"""Issue 15, items 3-5: `-o` respects what is there (a symlink, a device, a FIFO, a directory,
permission bits, writers running at once), and a sweep's cap is checked before any array is built.

The attacks are those of the reliability notes (/work/shared/research/reliability.md, defects 3-5).
No test here touches /dev: device nodes are made with ``os.mknod`` in a temporary folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from botec.errors import UserError, write_text_atomically

from conftest import LESSON


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("botec: error: "), err
    assert "Traceback" not in err + out
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp") or "botec-tmp" in p.name)


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --- regular files ---------------------------------------------------------------------------------

def test_a_new_file_gets_the_usual_permission_bits(tmp_path):
    target = tmp_path / "report.md"
    write_text_atomically(target, "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~current_umask()
    assert leftovers(tmp_path) == []


def test_replacing_a_file_keeps_its_permission_bits(tmp_path):
    """Before: the temporary file's bits (0644 under umask 022) replaced the user's 0640."""
    target = tmp_path / "private.md"
    target.write_text("old\n")
    target.chmod(0o640)
    write_text_atomically(target, "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_a_symlink_is_written_through_to_its_target(tmp_path, cli):
    """Before: link.md became a regular file and target.md was left unchanged."""
    target = tmp_path / "target.md"
    target.write_text("old\n")
    link = tmp_path / "link.md"
    link.symlink_to(target.name)
    code, out, err = cli("estimate", str(LESSON), "-f", "json", "-o", str(link))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == "target.md"
    assert json.loads(target.read_text())["accelerator"] == "lesson accelerator"
    assert leftovers(tmp_path) == []


def test_the_file_and_then_its_folder_are_flushed_after_the_rename(tmp_path, monkeypatch):
    """The rename is durable only once the folder is synced (POSIX): before, only the file's data was flushed."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor):
        events.append(("fsync", "folder" if stat.S_ISDIR(os.fstat(descriptor).st_mode) else "file"))
        real_fsync(descriptor)

    def replace(source, target):
        events.append(("replace", Path(target).name))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_text_atomically(tmp_path / "report.md", "# plan\n")
    assert events == [("fsync", "file"), ("replace", "report.md"), ("fsync", "folder")]
    assert (tmp_path / "report.md").read_text() == "# plan\n"


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.md"
    link.symlink_to("made.md")
    write_text_atomically(link, "made\n")
    assert link.is_symlink() and (tmp_path / "made.md").read_text() == "made\n"


# --- streams, FIFOs and devices --------------------------------------------------------------------

def test_dash_is_stdout(capsys):
    write_text_atomically("-", "to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"


def test_dev_stdout_is_written_to_stdout_and_never_replaced(cli, monkeypatch):
    """Before: `-o /dev/stdout` renamed a temporary file over /dev/stdout (as root), or failed with
    'Permission denied' creating it in /dev (as anyone else). Guarded: nothing may be created,
    renamed or removed under /dev by this test."""
    import pathlib
    import tempfile

    def guard(real):
        def call(*args, **kwargs):
            named = [str(a) for a in args] + [str(kwargs.get("dir", ""))]
            assert not any(n.startswith("/dev") for n in named), f"tried to touch /dev: {named}"
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(os, "replace", guard(os.replace))
    monkeypatch.setattr(os, "unlink", guard(os.unlink))
    monkeypatch.setattr(tempfile, "mkstemp", guard(tempfile.mkstemp))
    monkeypatch.setattr(pathlib.Path, "write_text", guard(pathlib.Path.write_text))
    code, out, err = cli("estimate", str(LESSON), "-f", "json", "-o", "/dev/stdout")
    assert code == 0, err
    assert json.loads(out)["accelerator"] == "lesson accelerator"


def test_a_fifo_is_written_into_not_replaced(tmp_path):
    """Before: the FIFO was replaced by a regular file and its reader waited forever."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    write_text_atomically(fifo, "through the pipe\n")
    reader.join(timeout=20)
    assert received == ["through the pipe\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert leftovers(tmp_path) == []


def make_device(folder: Path, name: str, minor: int) -> Path:
    """A character device like /dev/null (minor 3) or /dev/full (minor 7), in ``folder``; skips unless root."""
    if os.geteuid() != 0:
        pytest.skip("making a device node with os.mknod needs root; this test never touches /dev itself")
    node = folder / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        with open(node, "wb"):
            pass
    except PermissionError as error:  # no CAP_MKNOD, or a folder mounted nodev
        pytest.skip(f"cannot make or open a device node here ({error.strerror})")
    return node


def test_a_full_device_gives_one_line_and_stays_a_device(tmp_path, cli):
    """Before: as root, `-o /dev/full` printed 'wrote /dev/full', exit 0, and /dev/full became a regular file."""
    full = make_device(tmp_path, "full", 7)
    line = one_line_error(*cli("report", str(LESSON), "-o", str(full)))
    assert "-o/--output" in line and str(full) in line and "no space left" in line.lower()
    assert stat.S_ISCHR(full.stat().st_mode)
    assert leftovers(tmp_path) == []


def test_a_null_device_swallows_the_output_and_stays_a_device(tmp_path, cli):
    null = make_device(tmp_path, "null", 3)
    code, out, err = cli("estimate", str(LESSON), "-f", "json", "-o", str(null))
    assert code == 0, err
    assert stat.S_ISCHR(null.stat().st_mode)


# --- errors: one line naming the option and the path ------------------------------------------------

def test_a_directory_is_refused_in_one_line(tmp_path, cli):
    line = one_line_error(*cli("estimate", str(LESSON), "-o", str(tmp_path)))
    assert f"-o/--output: {tmp_path}: cannot write (it is a directory)" in line
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_refused_in_one_line(tmp_path, cli):
    target = tmp_path / "missing" / "report.md"
    line = one_line_error(*cli("estimate", str(LESSON), "-f", "markdown", "-o", str(target)))
    assert f"-o/--output: {target}: cannot write (No such file or directory)" in line


def test_a_read_only_folder_is_refused_and_the_old_file_kept(tmp_path, cli):
    if os.geteuid() == 0:
        pytest.skip("root may write into a read-only folder; the permission error cannot happen")
    target = tmp_path / "report.md"
    target.write_text("old\n")
    tmp_path.chmod(0o500)
    try:
        line = one_line_error(*cli("estimate", str(LESSON), "-f", "markdown", "-o", str(target)))
    finally:
        tmp_path.chmod(0o700)
    assert "-o/--output" in line and "Permission denied" in line
    assert target.read_text() == "old\n"


def test_the_csv_option_is_named_in_its_error(tmp_path, cli):
    line = one_line_error(*cli("sweep", str(LESSON), "--set", "supply.count=4,8", "--csv", str(tmp_path)))
    assert f"--csv: {tmp_path}: cannot write (it is a directory)" in line


def test_the_helper_error_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"^-o/--output: .*: cannot write \(it is a directory\)$"):
        write_text_atomically(tmp_path, "x")


# --- writers running at once -------------------------------------------------------------------------

WRITER = """
import sys
from botec.errors import write_text_atomically
path, me = sys.argv[1], sys.argv[2]
text = (me * 64 + "\\n") * 4000       # 260 KB: long enough for writes to overlap
for _ in range(25):
    write_text_atomically(path, text)
"""


def test_eight_writers_at_once_all_succeed_and_leave_one_whole_output(tmp_path):
    """Before: a fixed temporary name (.NAME.botec-tmp); 28 of 64 writers failed with 'No such file'."""
    target = tmp_path / "same.html"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), letter],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for letter in "abcdefgh"]
    results = [(w.wait(timeout=120), w.stderr.read()) for w in writers]
    for w in writers:
        w.stdout.close()
        w.stderr.close()
    assert results == [(0, "")] * 8
    text = target.read_text()
    assert text in {(letter * 64 + "\n") * 4000 for letter in "abcdefgh"}
    assert leftovers(tmp_path) == []


# --- sweep caps before work --------------------------------------------------------------------------

class _Arrays:
    """numpy as the space module sees it, with every array it builds recorded by size."""

    def __init__(self):
        self.sizes: list[int] = []

    def __getattr__(self, name):
        real = getattr(np, name)
        if name in ("arange", "linspace", "array"):
            def built(*args, **kwargs):
                result = real(*args, **kwargs)
                self.sizes.append(result.size)
                return result
            return built
        return real


@pytest.fixture
def no_work(monkeypatch):
    """Fail if a sweep is evaluated; record the arrays the axes build. The modules that bind ``evaluate_space`` by
    name at import are imported first, so that none keeps the stand-in after this test (monkeypatch restores
    only ``space``'s own attribute)."""
    import botec.explore.search  # noqa: F401
    import botec.explore.solve  # noqa: F401
    import botec.explore.space as space

    def evaluate(*args, **kwargs):
        raise AssertionError("the sweep was evaluated although it is over the cap")

    arrays = _Arrays()
    monkeypatch.setattr(space, "evaluate_space", evaluate)
    monkeypatch.setattr(space, "np", arrays)
    return arrays


@pytest.mark.parametrize("axis, size, widest", [
    ("supply.count=1..100000000000", "100,000,000,000", "supply.count alone has 100,000,000,000 values"),
    ("supply.count=1..1e11", "100,000,000,000", "supply.count alone has 100,000,000,000 values"),
    ("assumptions.headroom=0.1:0.5:1000000000", "1,000,000,000", "assumptions.headroom alone has 1,000,000,000"),
    ("strategy.micro_batch_size=8..10000000000/2", "4,999,999,997",
     "strategy.micro_batch_size alone has 4,999,999,997 values"),
])
def test_cli_sweep_over_the_cap_is_refused_before_any_array(cli, no_work, axis, size, widest):
    """Before: np.arange ran first (1e11 → internal error MemoryError; 1e9 → 20 s and 1.5 GB)."""
    line = one_line_error(*cli("sweep", str(LESSON), "--set", axis))
    assert f"--set: the space has {size} configurations, more than the cap of 10,000,000 ({widest}" in line
    assert "--force" in line
    assert no_work.sizes == []


def test_cli_sweep_product_over_the_cap_is_refused_before_any_array(cli, no_work):
    line = one_line_error(*cli("sweep", str(LESSON), "--set", "supply.count=1..1000",
                               "--set", "strategy.micro_batch_size=1..100", "--cap", "50000"))
    assert "the space has 100,000 configurations, more than the cap of 50,000 (supply.count alone has 1,000" in line
    assert no_work.sizes == []


def test_forced_sweep_of_an_impossible_axis_is_refused_not_a_memory_error(cli, no_work):
    line = one_line_error(*cli("sweep", str(LESSON), "--set", "supply.count=1..1e11", "--force"))
    assert "supply.count: the axis has 100,000,000,000 values, more than the 100,000,000 one axis may have" in line
    assert no_work.sizes == []


def test_api_sweep_over_the_cap_is_refused_before_any_array(no_work):
    import botec
    from botec.errors import ContractError

    with pytest.raises(ContractError, match=r"^axes: the space has 100,000,000,000 configurations, more than "
                                            r"cap=10,000,000 \(supply.count alone"):
        botec.sweep(LESSON, {"supply.count": "1..100000000000"})
    assert no_work.sizes == []


def test_web_sweep_over_the_cap_is_refused_before_any_array(no_work):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from botec.web.app import MAX_SWEEP, create_app

    client = TestClient(create_app(), base_url="http://127.0.0.1")
    for axis in ("supply.count=1..100000000000", "assumptions.headroom=0.1:0.5:1000000000"):
        response = client.post("/api/sweep", json={"contract": LESSON.read_text(), "axes": [axis]})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["field"] == "axes"
        assert f"more than this server's cap of {MAX_SWEEP:,}" in error["message"]
    assert no_work.sizes == []


def test_solve_over_too_many_values_is_refused_before_any_array(cli, no_work, monkeypatch):
    """Before: ``solve --over supply.count=1..100000000`` passed the one-axis limit and went on to build columns of
    100 million values for every quantity it reads (0.4 GB per million: past the machine's memory)."""
    import botec.explore.solve as solve

    monkeypatch.setattr(solve, "evaluate_space", no_work_evaluated)
    line = one_line_error(*cli("solve", str(LESSON), "--minimize", "supply.count",
                               "--over", "supply.count=1..100000000"))
    assert line == ("botec: error: --over: the space has 100,000,000 configurations, more than the 10,000,000 a "
                    "solve tries (supply.count alone has 100,000,000 values); narrow the range or give it a step, "
                    "a..b/step")
    assert no_work.sizes == []


def no_work_evaluated(*args, **kwargs):
    raise AssertionError("the solve was evaluated although it is over its cap")


def test_sweeps_under_the_cap_still_build_their_axes(cli):
    code, out, err = cli("sweep", str(LESSON), "--set", "strategy.micro_batch_size=2..8/3", "-f", "json")
    assert code == 0, err
    assert [row[0] for row in json.loads(out)["rows"]] == [2, 5, 8]


SWEEP_UNDER_A_MEMORY_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))
from botec.cli import main
sys.argv = ["botec", "sweep", sys.argv[1], "--set", "assumptions.headroom=0.1:0.5:1000000000"]
main()
"""


def test_a_capped_sweep_needs_no_memory_for_its_axis():
    """1e9 values would need 8 GB; under a 3 GB address-space limit the refusal still comes cleanly."""
    done = subprocess.run([sys.executable, "-c", SWEEP_UNDER_A_MEMORY_LIMIT, str(LESSON)],
                          capture_output=True, text=True, timeout=120)
    line = one_line_error(done.returncode, done.stdout, done.stderr)
    assert "the space has 1,000,000,000 configurations, more than the cap of 10,000,000" in line


# --- read-only targets, owners, signals mid-write (issue 21, item 1) ----------------------------------

def test_a_read_only_file_is_refused_unless_forced(tmp_path, cli):
    """Before: the rename replaced a 0444 file without a word."""
    target = tmp_path / "report.md"
    target.write_text("old\n")
    target.chmod(0o444)
    line = one_line_error(*cli("estimate", str(LESSON), "-f", "markdown", "-o", str(target)))
    assert line == f"botec: error: -o/--output: {target}: the file is read-only; pass --force to replace it"
    assert target.read_text() == "old\n" and leftovers(tmp_path) == []
    code, out, err = cli("estimate", str(LESSON), "-f", "markdown", "-o", str(target), "--force")
    assert code == 0, err
    assert target.read_text().startswith("# ") and stat.S_IMODE(target.stat().st_mode) == 0o444


@pytest.mark.parametrize("command", [["search"], ["sensitivity"], ["report", "-f", "markdown"],
                                     ["sweep", "--set", "supply.count=4,8", "-f", "csv"]])
def test_every_command_with_an_output_takes_force(tmp_path, cli, command):
    target = tmp_path / "out.md"
    target.write_text("old\n")
    target.chmod(0o400)
    line = one_line_error(*cli(*command, str(LESSON), "-o", str(target)))
    assert "-o/--output" in line and "pass --force" in line and target.read_text() == "old\n"
    code, out, err = cli(*command, str(LESSON), "-o", str(target), "--force")
    assert code == 0, err
    assert target.read_text() != "old\n"


def test_the_helper_refuses_a_file_without_any_write_bit_even_for_root(tmp_path):
    target = tmp_path / "pinned.json"
    target.write_text("{}\n")
    target.chmod(0o444)
    with pytest.raises(UserError, match=r"^--csv: .*pinned\.json: the file is read-only; pass --force"):
        write_text_atomically(target, "[]\n", "--csv")
    write_text_atomically(target, "[]\n", "--csv", force=True)
    assert target.read_text() == "[]\n"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can hand a file to another")
def test_root_replacing_a_users_file_leaves_it_the_users(tmp_path):
    """Before: `sudo botec ... -o ~user/report.md` left the report owned by root."""
    target = tmp_path / "theirs.md"
    target.write_text("old\n")
    target.chmod(0o640)
    os.chown(target, 4321, 4322)
    write_text_atomically(target, "new\n")
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640)
    assert target.read_text() == "new\n"


# The child holds its write mid-way (its fsync waits for a signal), so the parent can signal it while the temporary
# file exists, with no sleep and no race: whenever the signal comes after the file appears, it is removed.
HELD_WRITER = """
import os, signal, sys
# A foreground process's Ctrl-C: a shell starts a background job (pytest run with &) with SIGINT ignored, and
# botec rightly leaves an ignored signal alone, so the child takes Python's own handler as a terminal's would.
signal.signal(signal.SIGINT, signal.default_int_handler)
def held(descriptor):
    signal.pause()
os.fsync = held
if sys.argv[2] == "cli":
    from botec.cli import main
    sys.argv = ["botec", "estimate", sys.argv[3], "-f", "json", "-o", sys.argv[1]]
    main()
else:
    from botec.errors import write_text_atomically
    write_text_atomically(sys.argv[1], "x" * 42_000_000)
"""


@pytest.mark.parametrize("how, signal_name, status", [("helper", "SIGTERM", -15), ("cli", "SIGTERM", -15),
                                                      ("cli", "SIGINT", 130)])
def test_a_signal_mid_write_removes_the_temporary_file(tmp_path, how, signal_name, status):
    """Before: SIGTERM during a 42 MB write left a hidden .NAME.XXXX.tmp of 42 MB beside the target."""
    import signal
    import time

    target = tmp_path / "big.json"
    target.write_text("old\n")
    child = subprocess.Popen([sys.executable, "-c", HELD_WRITER, str(target), how, str(LESSON)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not leftovers(tmp_path):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child never began its write"
            time.sleep(0.01)   # polling the folder, not waiting on time: the deadline only bounds a broken child
        child.send_signal(getattr(signal, signal_name))
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == status, err
    assert leftovers(tmp_path) == [] and target.read_text() == "old\n"
    assert "Traceback" not in err
