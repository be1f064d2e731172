"""Jobs in child processes (placer.service.jobs.child): killed at their deadline or when the service
stops, their own errors carried back as they were, a process the system killed named as such."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from placer.errors import InputError
from placer.service.jobs.child import (
    ChildError, ChildInternalError, ChildJobs, JobCrashedError, JobDeadlineError, JobStoppedError,
)


def _pid_then_sleep(path: str, seconds: float) -> None:
    # written whole, then renamed: the test waits for the file to exist and may stop the job at once,
    # so the file must never be seen open and still empty
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(seconds)


def _refuse(value: str) -> None:
    raise InputError(f"field: bad value {value!r}")


def _bug() -> None:
    raise ZeroDivisionError("a bug in the job")


def _killed_by_the_system() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie until its fork server reaps it: not running any more
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] == "Z"


@pytest.fixture(scope="module")
def children():
    return ChildJobs()


def test_a_job_past_its_deadline_is_killed_and_the_error_names_the_deadline(children, tmp_path):
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    with pytest.raises(JobDeadlineError, match=r"sleeper was stopped at its deadline of 1.5 s \(a test's\)") as err:
        children.run(_pid_then_sleep, str(pid_file), 60, deadline_s=1.5, what="sleeper", why="a test's")
    assert 1.5 <= time.monotonic() - start < 5
    assert err.value.http_status == 504
    assert _gone(int(pid_file.read_text()))
    assert children.running == 0


def test_the_jobs_own_errors_come_back_as_they_were(children):
    with pytest.raises(ChildError, match="field: bad value 'x'") as err:
        children.run(_refuse, "x", deadline_s=30, what="refusal")
    assert err.value.http_status == 422 and err.value.exit_code == 2 and err.value.kind == "InputError"
    with pytest.raises(ChildInternalError, match="a bug in the job") as bug:
        children.run(_bug, deadline_s=30, what="buggy job")
    assert bug.value.kind == "ZeroDivisionError"


def test_a_child_the_system_killed_is_a_crash_not_a_deadline(children):
    start = time.monotonic()
    with pytest.raises(JobCrashedError, match="signal 9; killed by the system, perhaps out of memory"):
        children.run(_killed_by_the_system, deadline_s=60, what="victim")
    assert time.monotonic() - start < 10


def test_stop_kills_running_jobs_at_once_and_refuses_new_ones(tmp_path):
    own = ChildJobs()
    errors: list[BaseException] = []

    def job(i: int) -> None:
        try:
            own.run(_pid_then_sleep, str(tmp_path / f"pid{i}"), 60, deadline_s=60, what=f"job {i}")
        except BaseException as err:  # noqa: BLE001 - the test looks at what each job raised
            errors.append(err)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"pid{i}").exists() for i in range(2)):
        assert time.monotonic() < deadline, "the jobs did not start"
        time.sleep(0.05)
    start = time.monotonic()
    assert own.stop("the service stopped") == 2
    for t in threads:
        t.join(10)
    assert time.monotonic() - start < 5
    assert len(errors) == 2 and all(isinstance(e, JobStoppedError) for e in errors)
    assert all("the service stopped while it ran" in str(e) for e in errors)
    assert all(_gone(int((tmp_path / f"pid{i}").read_text())) for i in range(2))
    with pytest.raises(JobStoppedError, match="before it started"):
        own.run(_refuse, "x", deadline_s=10, what="late job")
