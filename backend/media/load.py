"""Loading a file as an attachment: the right loader for its kind, and a video's sound track.

``load_attachment(path, limits)`` checks the file (missing, directory, empty, unsupported,
content not matching its extension, corrupt, over a limit) and raises ``AttachmentError``
naming the file and the reason; nothing is sent and the caller keeps the prompt.
"""

from __future__ import annotations

from pathlib import Path

from backend.config.settings import MediaSettings
from backend.media import audio, images, video
from backend.media.attachment import Attachment, check_file, sha256_of

LOADERS = {"image": images.load, "audio": audio.load, "video": video.load}


def load_attachment(path_text: str | Path, limits: MediaSettings | None = None) -> Attachment:
    limits = limits or MediaSettings()
    path = Path(path_text).expanduser()
    return LOADERS[check_file(path)](path, limits)


def load_attachments(path_text: str | Path, limits: MediaSettings | None = None) -> list[Attachment]:
    """``load_attachment``, plus a video's sound track as audio when ``media.video_audio`` is on."""
    limits = limits or MediaSettings()
    first = load_attachment(path_text, limits)
    if first.kind == "video" and limits.video_audio:
        track = video.sound_track(first.path, limits)
        return [first] if track is None else [first, track]
    return [first]


def as_sent(
    attachments: list[Attachment], limits: MediaSettings | None = None
) -> tuple[list[Attachment], list[str]]:
    """The attachments as their files are at send time, and a notice for each file that changed
    since it was attached (it is loaded again: the model and the history get the same content).
    A file that is gone or no longer a file raises ``AttachmentError``."""
    paths = list(dict.fromkeys(attachment.path for attachment in attachments))
    sent: list[Attachment] = []
    notices: list[str] = []
    for path in paths:
        group = [attachment for attachment in attachments if attachment.path == path]
        check_file(path)
        if sha256_of(path) == group[0].sha256:
            sent += group
            continue
        sent += load_attachments(path, limits)
        notices.append(f"{path} changed after it was attached: the file as it is now is sent.")
    return sent, notices
