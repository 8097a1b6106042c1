"""The `tinycc-ml` command and `python -m tinycc_ml`: the command line with Ctrl-C handled from the first
instruction (one line, exit status 130, whatever the interrupt cut short)."""

import os
import signal
import sys

INTERRUPTED_LINE = "tinycc-ml: error: interrupted\n"
_interrupted = False


def _on_sigint(signum, frame):
    # remembered, because a library may turn the KeyboardInterrupt into another error (numpy, interrupted
    # while importing its C core, raises an ImportError): the process still ends with the one line
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _run_semaphore_finalizers() -> None:
    """What a normal exit would do for multiprocessing's objects (os._exit skips it): their finalizers unlink
    the named semaphores of worker pools' queues, else loky's resource tracker reports them as leaked when
    it outlives this process."""
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is None:
        return
    try:
        mp_util._run_finalizers(0)  # priorities >= 0: semaphores and queues; the thread joins (< 0) are not run
    except BaseException:  # a second Ctrl-C, a finalizer failing: the exit goes on
        pass


def _exit_interrupted() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    _run_semaphore_finalizers()
    os._exit(130)


def _end_interrupted() -> None:
    sys.stderr.write(INTERRUPTED_LINE)
    _exit_interrupted()


def run() -> None:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when the caller ignores Ctrl-C
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        # deferred: the command line's start-up (Ctrl-C is one line from the first instruction)
        from tinycc_ml.cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line is still being imported: one line, like later
        _end_interrupted()
    except BaseException:
        if _interrupted:
            _end_interrupted()
        raise
    try:
        status = main()
        if status == 130:  # interrupted: the line is out and nothing is half-written; no second chance for Ctrl-C
            _exit_interrupted()
    except KeyboardInterrupt:  # a second Ctrl-C right after the first one's line
        _exit_interrupted()
    except BaseException:
        if _interrupted:  # the interrupt surfaced as another error (see _on_sigint): nothing was written yet
            _end_interrupted()
        raise
    sys.exit(status)
