"""The relay that joins a task's TCP connection back to the driver onto the backend's local socket."""

from __future__ import annotations

import socket
import time

import pytest

from cohabit.runtime.channel import Channel, ChannelClosed
from cohabit.runtime.relay import Relay


@pytest.fixture
def relay():
    r = Relay("127.0.0.1")
    yield r
    r.close()


def connect(relay: Relay, token: str) -> Channel:
    sock = socket.create_connection(relay.address, timeout=5)
    sock.sendall(token.encode() + b"\n")
    return Channel(sock)


def test_relay_carries_messages_both_ways_including_what_was_sent_before_the_task_connected(relay) -> None:
    token, mine = relay.expect()
    backend = Channel(mine)
    backend.send({"type": "config", "n": 1})  # before the task exists: buffered in the socketpair
    task = connect(relay, token)
    assert task.recv(timeout=5) == {"type": "config", "n": 1}
    task.send({"type": "ready"})
    task.send({"type": "progress", "iterations": 3})
    got = []
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        got += backend.recv_ready()
        time.sleep(0.01)
    assert got == [{"type": "ready"}, {"type": "progress", "iterations": 3}]


def test_relay_task_death_reaches_the_backend_as_end_of_file(relay) -> None:
    token, mine = relay.expect()
    backend = Channel(mine)
    task = connect(relay, token)
    task.send({"type": "ready"})
    task.close()  # the actor's process died: its TCP connection drops
    deadline = time.monotonic() + 5
    seen = []
    while not backend.closed and time.monotonic() < deadline:
        seen += backend.recv_ready()
        time.sleep(0.01)
    assert backend.closed and seen == [{"type": "ready"}]


def test_relay_backend_close_reaches_the_task_and_unknown_tokens_are_refused(relay) -> None:
    token, mine = relay.expect()
    task = connect(relay, token)
    Channel(mine).close()  # the backend killed the task: the task sees end of file
    with pytest.raises(ChannelClosed):
        task.recv(timeout=5)
    stranger = connect(relay, "not-a-token")
    with pytest.raises(ChannelClosed):
        stranger.recv(timeout=5)
    _, mine2 = relay.expect()
    late = connect(relay, token)  # a token is good for one connection only
    with pytest.raises(ChannelClosed):
        late.recv(timeout=5)
    mine2.close()
