"""Pipes with deadlines and caps, for descriptors of any number (poll, not select). Standard library only."""

from __future__ import annotations

import os
import select
import time

MAX_LINE_BYTES = 1 << 20  # one case's result, or one job's header


class LineTooLong(ValueError):
    pass


class LineReader:
    """Reads newline-terminated lines from a descriptor with poll(), a deadline and a size cap."""

    def __init__(self, fd: int, cap: int = MAX_LINE_BYTES):
        self.fd, self.cap, self.buffer = fd, cap, bytearray()
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)

    def readline(self, deadline: float | None) -> bytes | None:
        """The next line without its newline; None at end of file; TimeoutError past the deadline."""
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[:end + 1]
                return line
            if len(self.buffer) > self.cap:
                raise LineTooLong(f"a line over {self.cap} bytes")
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                if not self.poller.poll(remaining * 1000):
                    continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk


def write_all(fd: int, data: bytes, deadline: float) -> None:
    """Write everything to a non-blocking descriptor, waiting for room only when the pipe is full."""
    view = memoryview(data)
    poller = None
    while view:
        try:
            view = view[os.write(fd, view):]
            continue
        except BlockingIOError:
            pass
        if poller is None:
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        poller.poll(remaining * 1000)
