"""A HiGHS solver that prints nothing.

HiGHS writes its banner ("Running HiGHS ... Copyright ...") to file
descriptor 1 from C++ when a process builds its first ``Highs`` object, before
any option such as ``output_flag`` can be set. That first object is built with
descriptor 1 pointed at ``/dev/null``; later objects print no banner, and
``output_flag`` off silences the solver's log.
"""

from __future__ import annotations

import os
import sys
import threading

import highspy

_lock = threading.Lock()
_banner_swallowed = False


def quiet_highs() -> highspy.Highs:
    """A new ``highspy.Highs`` with its output off and no banner on stdout."""
    global _banner_swallowed
    with _lock:
        if not _banner_swallowed:
            sys.stdout.flush()
            saved = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
                h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(devnull)
            _banner_swallowed = True
        else:
            h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h
