"""The sandbox's process table: a process it stops is gone when ``stop`` returns, so its ports are free for a start
right after (a broker restarted by a test, `drover sandbox down` then `up`)."""

import socket
import sys
from pathlib import Path

from drover.sandbox.processes import ProcessTable
from tests.integration.helpers import wait_until

# A process that ignores SIGTERM (as a JVM still in its shutdown hooks does), holds a listening port and enough memory
# that the kernel takes a moment to tear it down once killed.
STUBBORN = """
import signal, socket, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
ballast = bytearray(300 * 1024 * 1024)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
print(server.getsockname()[1], flush=True)
time.sleep(120)
"""


def test_a_process_killed_after_its_grace_is_gone_and_its_port_free_when_stop_returns(tmp_path):
    table = ProcessTable(tmp_path / "pids", tmp_path / "logs")
    table.start("stubborn", [sys.executable, "-c", STUBBORN])
    log = table.log_path("stubborn")
    told = wait_until(lambda: log.exists() and log.read_text().strip(), 30, 0.1, "the process telling its port")
    port = int(told)
    assert table.stop(["stubborn"], timeout_s=0.5) == ["stubborn"]
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
    assert table.pid("stubborn") is None


# A process whose main thread has ended while another of its threads runs on, holding its listening port: the kernel
# shows the main thread as a zombie, but the process is alive (a JVM in its shutdown can be seen so).
LEADER_GONE = """
import ctypes, socket, threading, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
print(server.getsockname()[1], flush=True)
threading.Thread(target=time.sleep, args=(3,)).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_process_whose_main_thread_ended_while_others_run_is_still_running_and_stop_waits_for_it(tmp_path):
    table = ProcessTable(tmp_path / "pids", tmp_path / "logs")
    table.start("leader-gone", [sys.executable, "-c", LEADER_GONE])
    log = table.log_path("leader-gone")
    port = int(wait_until(lambda: log.exists() and log.read_text().strip(), 30, 0.1, "the process telling its port"))
    pid = table.pid("leader-gone")
    assert pid is not None
    wait_until(lambda: "State:\tZ" in Path(f"/proc/{pid}/status").read_text(), 10, 0.05, "its main thread ended")
    assert table.pid("leader-gone") == pid
    assert table.stop(["leader-gone"]) == ["leader-gone"]
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
    assert table.pid("leader-gone") is None
