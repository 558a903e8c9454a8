"""The two roles of a warp-specialized program (``warp_specialize``, docs/perf/
warp_specialization.md) in the interpreter: the producer's region runs as a coroutine beside
the consumers' code, so the mbarrier protocol between them is checked as the GPU runs it.

One role runs at a time (a Python thread each, handing a baton over). A role switches only at
an ``mbarrier_wait`` whose phase has not completed: the other role runs until it waits too or
ends, then the first checks again. A wait that neither role can complete (both waiting, or the
producer gone) would hang the GPU: it is a fault, as is a producer that has not finished when
its program ends. The ops of the two roles touch different values, so they share one state.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, Optional

import numpy as np

from .errors import OpFault

_ROLES: Dict[int, "Roles"] = {}  # id(ProgramState) -> the running program's roles


class _Abandoned(BaseException):
    """Ends a producer whose program ended (by a fault) before it did."""


class Roles:
    def __init__(self, state, block) -> None:
        self.state, self.block = state, block
        self.baton = threading.Condition()
        self.turn = "consumer"
        # The condition each role waits for, while it waits (None: running).
        self.waiting: Dict[str, Optional[Callable[[], bool]]] = {"consumer": None,
                                                                  "producer": None}
        self.done = self.abandoned = False
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._produce, daemon=True)

    def _produce(self) -> None:
        try:
            self._await_turn("producer")
            with np.errstate(all="ignore"):
                self.state.run_block(self.block, [])
        except _Abandoned:
            return
        except BaseException as e:  # a fault of the producer: the consumers re-raise it
            self.error = e
        with self.baton:
            self.done, self.turn = True, "consumer"
            self.baton.notify_all()

    def _await_turn(self, role: str) -> None:
        with self.baton:
            while self.turn != role:
                self.baton.wait()
            if self.abandoned:
                raise _Abandoned()

    def role(self) -> str:
        return "producer" if threading.current_thread() is self.thread else "consumer"

    def _hand_over(self, role: str) -> None:
        other = "producer" if role == "consumer" else "consumer"
        if not self.thread.is_alive() and not self.done:
            self.thread.start()
        with self.baton:
            self.turn = other
            self.baton.notify_all()
        self._await_turn(role)
        if self.error is not None and role == "consumer":
            raise self.error

    def wait(self, completed: Callable[[], bool], what: str) -> None:
        """Returns once ``completed()``; runs the other role meanwhile."""
        role = self.role()
        other = "producer" if role == "consumer" else "consumer"
        while not completed():
            blocked = self.waiting[other]  # the other's own wait, if it is in one
            if (blocked is not None and not blocked()) or (role == "consumer" and self.done):
                stuck = "the producer has ended" if role == "consumer" and self.done else \
                    f"the {other} waits too, for a phase only the {role} can complete"
                raise OpFault(f"{what} would never return: {stuck} (a hang on the GPU)")
            self.waiting[role] = completed
            try:
                self._hand_over(role)
            finally:
                self.waiting[role] = None

    def finish(self) -> None:
        """At the program's end (the consumers'): the producer must end too."""
        if not self.done and self.thread.is_alive():
            self.wait(lambda: self.done, "the end of the program")
        if self.error is not None:
            raise self.error

    def abandon(self) -> None:
        with self.baton:
            self.abandoned = True
            self.turn = "producer"
            self.baton.notify_all()


def start(state, block) -> None:
    _ROLES[id(state)] = Roles(state, block)


def current(state) -> Optional[Roles]:
    return _ROLES.get(id(state))


def end_program(state, failed: bool) -> None:
    """After each program: checks that its producer ended (or drops it after a fault)."""
    roles = _ROLES.pop(id(state), None)
    if roles is None:
        return
    if failed:
        roles.abandon()
        return
    try:
        roles.finish()
    except OpFault as e:
        roles.abandon()
        raise state.error(None, str(e)) from None
    except BaseException:
        roles.abandon()
        raise
