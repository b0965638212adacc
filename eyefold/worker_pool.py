"""Worker processes that outlive each other: one task at a time each, a dead one replaced.

``concurrent.futures.ProcessPoolExecutor`` cannot tell which task a worker held when that
worker dies (a segfault in onnx's C++, the OOM killer): the whole pool breaks and every
task left is lost. Here each worker is a spawned process fed one task at a time over its
own pipe, and the supervisor waits on the pipes and the processes' sentinels together. A
worker that dies is known with the task it held: that task alone gets the ``died`` result
naming the signal, and a fresh worker takes the tasks left. Each worker imports what
``run`` needs once, as a pool worker does.

Ctrl-C reaches the workers too (a terminal signals the whole process group). A worker
raises ``KeyboardInterrupt`` once, so the files it was writing are cleaned up, and exits
without a traceback; a worker still starting has the signal blocked until it can do so.
The supervisor forwards the interrupt to its workers, waits for them and re-raises it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["death_cause", "run_tasks"]

Task = TypeVar("Task")
Result = TypeVar("Result")

# How long interrupted workers get to remove their temporary files before they are killed.
_STOP_SECONDS = 10.0


def death_cause(exitcode: int | None) -> str:
    """How a worker ended, for a person: ``SIGKILL``, ``signal 77`` or ``exit status 3``."""
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


def _interrupt_once(signum: int, frame: object) -> None:
    """The first SIGINT raises ``KeyboardInterrupt``; later ones cannot cut its clean-up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _serve(
    connection: multiprocessing.connection.Connection,
    run: Callable[[Any], Any],
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
) -> None:
    """A worker's life: run each task received, send its result; None or EOF ends it."""
    signal.signal(signal.SIGINT, _interrupt_once)
    try:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        initializer(*initargs)
        while (task := connection.recv()) is not None:
            connection.send(run(task))
    except KeyboardInterrupt:
        sys.exit(128 + signal.SIGINT)
    except (EOFError, BrokenPipeError):  # the supervisor is gone: nobody wants the result
        sys.exit(0)


@dataclasses.dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    connection: multiprocessing.connection.Connection
    index: int | None = None  # the task it holds


@contextlib.contextmanager
def _sigint_blocked() -> Any:
    """SIGINT held back (not lost) while a worker starts: the worker inherits the block."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@dataclasses.dataclass
class _Supervisor(Generic[Task, Result]):
    tasks: Sequence[Task]
    run: Callable[[Task], Result]
    died: Callable[[Task, str], Result]
    on_result: Callable[[int, Result], None]
    initializer: Callable[..., None]
    initargs: tuple[Any, ...]
    workers: list[_Worker] = dataclasses.field(default_factory=list)

    def start_worker(self) -> _Worker:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(theirs, self.run, self.initializer, self.initargs),
            name="eyefold-worker",
        )
        with _sigint_blocked():  # an interrupt now is raised once the worker is known
            process.start()
            theirs.close()
            worker = _Worker(process, ours)
            self.workers.append(worker)
        return worker

    def give(self, worker: _Worker, index: int) -> None:
        """Hands task ``index`` to ``worker``; if it is already dead, its death fails it."""
        worker.index = index
        with contextlib.suppress(OSError):
            worker.connection.send(self.tasks[index])

    def collect(self, worker: _Worker, ready: list[object]) -> None:
        """Takes ``worker``'s result, or its death (its task fails, the worker is dropped)."""
        if worker.connection in ready:
            try:
                result = worker.connection.recv()
            except (EOFError, OSError):
                pass  # died: handled below
            else:
                index, worker.index = worker.index, None
                assert index is not None  # a result answers a task
                self.on_result(index, result)
                return
        elif worker.process.sentinel not in ready:
            return
        worker.process.join()
        worker.connection.close()
        self.workers.remove(worker)
        if worker.index is not None:
            cause = death_cause(worker.process.exitcode)
            self.on_result(worker.index, self.died(self.tasks[worker.index], cause))

    def run_all(self, jobs: int) -> None:
        pending = deque(range(len(self.tasks)))
        while pending or self.workers:
            busy = sum(worker.index is not None for worker in self.workers)
            while len(self.workers) < min(jobs, busy + len(pending)):
                self.start_worker()
            for worker in self.workers:
                if worker.index is None and pending:
                    self.give(worker, pending.popleft())
            if not pending and not any(w.index is not None for w in self.workers):
                break
            waitables = [w.connection for w in self.workers]
            waitables += [w.process.sentinel for w in self.workers]
            ready = multiprocessing.connection.wait(waitables)
            for worker in list(self.workers):
                self.collect(worker, ready)

    def stop(self) -> None:
        """Ends the idle workers of a finished run."""
        for worker in self.workers:
            with contextlib.suppress(OSError):
                worker.connection.send(None)
        self.join_all()

    def interrupt(self) -> None:
        """Passes an interrupt on to the workers and waits for them to clean up."""
        with contextlib.suppress(ValueError):  # only the main thread handles signals
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        for worker in self.workers:
            if worker.process.pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(worker.process.pid, signal.SIGINT)
        self.join_all()

    def join_all(self) -> None:
        for worker in self.workers:
            worker.process.join(_STOP_SECONDS)
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join()
            worker.connection.close()
        self.workers.clear()


def run_tasks(
    tasks: Sequence[Task],
    run: Callable[[Task], Result],
    *,
    died: Callable[[Task, str], Result],
    jobs: int,
    on_result: Callable[[int, Result], None],
    initializer: Callable[..., None],
    initargs: tuple[Any, ...] = (),
) -> None:
    """Runs ``run(task)`` for every task in up to ``jobs`` spawned worker processes.

    ``on_result(index, result)`` is called in this process as each task finishes, in
    completion order. A task whose worker died gets ``died(task, cause)`` instead
    (``cause`` as :func:`death_cause` words it), and a fresh worker takes the tasks left.
    ``run``, ``died`` and ``initializer`` must be module-level functions (they are
    pickled), the tasks and results picklable.
    """
    supervisor = _Supervisor(tasks, run, died, on_result, initializer, initargs)
    handler = signal.getsignal(signal.SIGINT)
    try:
        supervisor.run_all(jobs)
    except BaseException:
        supervisor.interrupt()
        raise
    finally:
        if handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)
    supervisor.stop()
