"""Harmony's real runtime (Lee et al., §IV and §VI): subtask queues, synchronizer, spill/reload.

* :mod:`.sync` — the subtask synchronizer (a job's next subtask waits for all its workers).
* :mod:`.queues` — per-node CPU queue (one COMP at a time), network queue (primary + secondary)
  and link budget (the secondary yields to the primary).
* :mod:`.server` — the node-queue server process (unix socket) holding both.
* :mod:`.service` — starting and stopping that server (LocalBackend uses it for pipelined groups).
* :mod:`.gate` — ``HarmonyGate``, the client a PS worker's ``gate.subtask(kind)`` talks through.
"""
