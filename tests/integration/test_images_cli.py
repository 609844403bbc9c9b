"""``sandbox images build`` prints each image once, with its state, and nothing else."""

from __future__ import annotations

import pytest

from cli.main import main
from sandbox.containers.images import image_tag

pytestmark = pytest.mark.docker


def test_images_build_prints_each_image_once(capsys: pytest.CaptureFixture[str]) -> None:
    """postgres and redis are built at collection (tests/conftest.py): both are present."""
    code = main(["images", "build", "postgres", "redis"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == ""
    assert err.splitlines() == [
        f"postgres: {image_tag('postgres')} present",
        f"redis: {image_tag('redis')} present",
    ]
