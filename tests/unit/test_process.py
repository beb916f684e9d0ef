import sys

from vectide.services.infra.process import ManagedProcess

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)", "vectide-test-sleeper"]


def test_start_status_stop(tmp_path):
    proc = ManagedProcess("sleeper", tmp_path, "vectide-test-sleeper")
    pid = proc.start(SLEEPER)
    assert proc.pid() == pid
    assert proc.stop(timeout_s=5)
    assert proc.pid() is None
    assert not proc.pid_file.exists()
    assert proc.stop() is False


def test_stale_or_foreign_pid_file_is_ignored(tmp_path):
    proc = ManagedProcess("sleeper", tmp_path, "vectide-test-sleeper")
    proc.pid_file.parent.mkdir(parents=True)
    proc.pid_file.write_text("1\n")  # alive, but not ours
    assert proc.pid() is None
    assert not proc.pid_file.exists()


def test_term_ignoring_process_is_killed(tmp_path):
    proc = ManagedProcess("stubborn", tmp_path, "vectide-test-stubborn")
    code = "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    proc.start([sys.executable, "-c", code, "vectide-test-stubborn"])
    assert proc.stop(timeout_s=0.5)
    assert proc.pid() is None


def test_early_exit_is_detected_with_log(tmp_path):
    proc = ManagedProcess("crasher", tmp_path, "vectide-test-crasher")
    proc.start([sys.executable, "-c", "print('boom'); raise SystemExit(3)", "vectide-test-crasher"])
    import time

    deadline = time.monotonic() + 5
    while not proc.exited_early() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.exited_early()
    assert "boom" in proc.log_tail()


def test_a_child_that_has_not_exec_ed_yet_is_still_ours(tmp_path):
    """Between fork and exec a child's command line is its parent's: a start-up check then
    must not take it for a stranger (and lose track of it)."""
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        proc = ManagedProcess("starting", tmp_path, "vectide-test-not-in-its-cmdline")
        proc.pid_file.parent.mkdir(parents=True)
        proc.pid_file.write_text(f"{child.pid}\n")
        assert proc.pid() == child.pid
        assert not proc.exited_early()
    finally:
        child.kill()
        child.wait()
