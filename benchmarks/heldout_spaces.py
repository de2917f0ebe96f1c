"""Fetch a brute-forced tuning space the strategies were never tuned on, for `replay.py`.

    python benchmarks/heldout_spaces.py DIR
    python benchmarks/replay.py --spaces DIR --strategies bo+local --out FILE

The default strategy was chosen and tuned on the three spaces in ../shared/tuning-spaces; a
space it never saw tells whether it learned those spaces or the shape tuning spaces have. The
autotuning-methodology package (Willemsen et al., MIT License) ships one in its source
distribution as a test fixture: a 2D convolution brute-forced on one GPU, 6768 configurations
(5256 valid) over other parameters than the shared convolution spaces (filter sizes, padding,
read-only loads). pip downloads it from the package index; it is written to
DIR/convolution_mock-gpu_T4.json.gz.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "autotuning-methodology==1.1.0"
MEMBER = ("autotuning_methodology-1.1.0/tests/autotuning_methodology/integration/mockfiles/"
          "mock_gpu_T4.json")
NAME = "convolution_mock-gpu_T4.json.gz"


def fetch(out_dir: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", "--dest", tmp, PACKAGE], check=True)
        (sdist,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(sdist) as tar:
            member = tar.extractfile(MEMBER)
            if member is None:
                sys.exit(f"{sdist.name} holds no {MEMBER}")
            data = member.read()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / NAME
    path.write_bytes(gzip.compress(data))
    return path


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help=f"where to write {NAME}")
    print(f"wrote {fetch(Path(parser.parse_args().dir))}")
