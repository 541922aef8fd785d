"""cohabit as a long-running service: ``cohabit serve``, its store, REST API and client.

See ``docs/service.md``. The scheduler itself is ``cohabit.engine.loop.Scheduler``, run forever
through the ``JobSource`` hook of :mod:`cohabit.engine.live`.
"""
