"""The HTML report opened in a real browser: Debian's Chromium, headless, with no network
(the report must need none), takes a full-page screenshot; the page is drawn (images decoded,
not blank) and Chromium asked for nothing over the network. The test command installs
chromium (scripts/test.sh) and a missing browser fails this test there; elsewhere its
`browser` marker skips it, saying so."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from PIL import Image

WIDTH, HEIGHT = 1280, 4000
# As the machine notes say: no sandbox as root, no GPU, and none of Chromium's own
# background connections (this machine's network refuses them).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]  # fmt: skip


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is not installed (scripts/test.sh installs Debian's chromium)"
    return found


def screenshot(page: Path, shot: Path, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}",
                           f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                           page.as_uri()], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip


def test_the_report_opens_in_headless_chromium(slow_report, tmp_path):
    shot = tmp_path / "slow-consumer.png"
    run = screenshot(slow_report, shot, tmp_path / "profile")
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.exists(), run.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    # drawn, not blank: the page's grey, the sections' white, and the figures' colours
    small = image.resize((WIDTH // 8, HEIGHT // 8))
    colours = {small.getpixel((x, y)) for x in range(small.width) for y in range(small.height)}
    assert len(colours) > 200
    # the credit figure's shaded stalls (matplotlib's red at alpha 0.22 on white) are on it
    pink = sum(1 for x in range(small.width) for y in range(small.height)
               if _near(small.getpixel((x, y)), (245, 208, 208)))  # fmt: skip
    assert pink > 50
    # nothing was fetched: Chromium says so when a page asks for the network
    assert "ERR_" not in run.stderr and "net::" not in run.stderr


def _near(colour: tuple, target: tuple, tolerance: int = 14) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(colour, target))
