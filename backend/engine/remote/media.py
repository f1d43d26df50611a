"""A turn with images or audio, for a vLLM server: our rendered prompt cut at its media
placeholders, each piece a text part, each attachment a data-URL part between them, sent to
``/v1/chat/completions`` with a request chat template that joins the parts back unchanged (the
server's processor then expands each placeholder, as the in-process engine's does).

So the server sees exactly the prompt the in-process path renders — the model's own template,
tools and history included — and parity holds. The request template needs the server started
with ``--trust-request-chat-template`` (``gemma-chat serve`` passes it). Images travel as PNG
(lossless: the server decodes the same pixels), audio as 32-bit float WAV (the same samples). Video cannot:
our frames are sampled and timed here, and a server samples its own; it is refused before
anything is sent.
"""

from __future__ import annotations

import base64
import io
import re
from typing import Any

from backend.errors import GemmaChatError

PLACEHOLDERS = {"<|image|>": "image", "<|audio|>": "audio"}
PLACEHOLDER = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))
JOIN_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part.type == 'text' -%}{{ part.text }}"
    "{%- elif part.type in ('image', 'image_url') -%}<|image|>"
    "{%- elif part.type in ('audio', 'input_audio', 'audio_url') -%}<|audio|>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endfor -%}"
)
"""Writes the parts back as one prompt: text verbatim, each media part as its placeholder. The
loop over ``message['content']`` is what makes vLLM pass the parts as a list (its "openai"
content format, media parts as ``{"type": "image"}``) rather than flattening them to a string."""


class MediaNotSendable(GemmaChatError):
    """Media a server cannot take from us."""


def media_parts(prompt: str, multi_modal_data: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The prompt as chat content parts, each placeholder replaced by its attachment's data URL."""
    if "video" in multi_modal_data:
        raise MediaNotSendable(
            "A video cannot be sent to a vLLM server: its frames are sampled here, and the server "
            "would sample its own.",
            "Remove the video, or chat with the in-process engine (without --server).",
        )
    queues = {kind: list(items) for kind, items in multi_modal_data.items()}
    parts: list[dict[str, Any]] = []
    position = 0
    for match in PLACEHOLDER.finditer(prompt):
        kind = PLACEHOLDERS[match.group()]
        if not queues.get(kind):
            raise MediaNotSendable(f"The prompt has more {kind} placeholders than {kind} attachments.")
        parts.append({"type": "text", "text": prompt[position : match.start()]})
        parts.append(_part(kind, queues[kind].pop(0)))
        position = match.end()
    parts.append({"type": "text", "text": prompt[position:]})
    left = [kind for kind, items in queues.items() if items]
    if left:
        raise MediaNotSendable(f"The prompt has no placeholder for an attachment ({', '.join(left)}).")
    return [part for part in parts if part["type"] != "text" or part["text"]]


def _part(kind: str, payload: Any) -> dict[str, Any]:
    if kind == "image":
        buffer = io.BytesIO()
        payload.save(buffer, format="PNG")
        url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
        return {"type": "image_url", "image_url": {"url": url}}
    samples, rate = payload
    return {"type": "input_audio", "input_audio": {"data": _wav(samples, rate), "format": "wav"}}


def _wav(samples: Any, rate: int) -> str:
    """A 32-bit float WAV (format 3) of the samples, bit for bit: what the server decodes is the
    array the in-process engine gets."""
    import struct

    import numpy as np

    data = np.asarray(samples, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, int(rate), int(rate) * 4, 4, 32)
    body = (
        b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    )
    return base64.b64encode(b"RIFF" + struct.pack("<I", len(body)) + body).decode()
