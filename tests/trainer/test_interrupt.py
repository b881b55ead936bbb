"""StopFlag: the first Ctrl-C or SIGTERM asks for a graceful stop; a second one falls through to the default."""

from __future__ import annotations

import signal

import pytest

from foxhunt.trainer.interrupt import StopFlag


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_first_signal_requests_a_stop_and_handlers_are_restored(signum: signal.Signals) -> None:
    before = signal.getsignal(signum)
    with StopFlag() as stop:
        assert not stop.requested
        assert signal.getsignal(signum) != before
        signal.raise_signal(signum)
        assert stop.requested
    assert signal.getsignal(signum) == before


def test_second_sigint_interrupts_for_real() -> None:
    original = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, whatever the runner set
    try:
        with StopFlag() as stop:
            signal.raise_signal(signal.SIGINT)
            assert stop.requested
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, original)


def test_request_without_a_signal() -> None:
    with StopFlag() as stop:
        stop.request("test")
        stop.request("again")
        assert stop.requested
