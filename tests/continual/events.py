"""Reads the scalars of TensorBoard event files (TFRecord framing, tensorboardX's protos)."""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path

from tensorboardX.proto import event_pb2


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value), ...] over every event file in ``folder``, in file order, as
    TensorBoard shows them: a session start at step P (a writer's ``purge_step``) hides
    the events read so far at steps >= P."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        at = 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            at += 12  # length and its CRC
            event = event_pb2.Event()
            event.ParseFromString(data[at:at + length])
            at += length + 4  # data and its CRC
            if event.session_log.status == event_pb2.SessionLog.START:
                for tag, points in out.items():
                    out[tag] = [(s, v) for s, v in points if s < event.step]
            for value in event.summary.value:
                out[value.tag].append((event.step, value.simple_value))
    return dict(out)
