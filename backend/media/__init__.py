"""Attachments: loading, validation and token costs of images, audio and video."""
