#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, from the fixture stores (written by zarr-python,
xarray, anndata and zarrs — see tests/fixtures/README.md).

    python3 fuzz/seeds.py            # writes fuzz/corpus/<target>/ (not committed)

- metadata: every metadata document of the fixtures, prefixed by the byte that picks its parser
  (v2 `.zarray`/`.zgroup` followed by NUL and their `.zattrs`).
- open_store: each node of each fixture store whose files fit in 48 KiB, as the entries
  `[key length u8][key][value length u16 LE][value]` that fuzz_targets/open_store.rs reads
  (among them tensorstore's nested shards, `tensorstore_nested.zarr`, json2 chunks of
  `numcodecs_v{2,3}.zarr`, and `holdouts_*.zarr`: node names in several scripts and with ASCII
  punctuation as their keys, v2 `null` fill values, a struct whose datetime field holds NaT;
  `rectilinear_v3.zarr`: rectilinear chunk grids, explicit and run-length edges, in shards;
  `struct_v3.zarr`: zarr-python 3.4's `struct` type, nested, big-endian, sharded, NaT in fields
  and fill values; `zarrs_optional.zarr`: zarrs' `optional` type and codec, masks through
  `packbits` with and without a padding byte and `zstd`, strings).
- decode_chunk: chunk files of the fixtures' string arrays, behind the selector bytes of their
  codec (v3 `vlen-utf8` + zstd, v2 `vlen-utf8` + blosc/zstd where the fixture says so); and in
  its v3 mode, each v3 array's `zarr.json` with one of its chunks (every codec chain and data
  type of the fixtures: sharding, `scale_offset`, `cast_value`, `packbits`, `optional`, …).
- icechunk: every snapshot and manifest of the Icechunk fixture repositories (among them
  `rectilinear.icechunk`'s rectilinear arrays), as the flatbuffer
  behind the selector byte that picks the file of `unwritten.icechunk` it replaces (see
  fuzz_targets/icechunk.rs), and once more with its header (selector bit 7). Decompressing
  needs the `zstd` command; without it these seeds are left out.
"""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent
FIXTURES = ROOT.parent / "tests" / "fixtures" / "data"
CORPUS = ROOT / "corpus"
METADATA = {".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json"}


def write(target, data):
    out = CORPUS / target
    out.mkdir(parents=True, exist_ok=True)
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)


def metadata_seeds(store):
    for path in store.rglob("*"):
        if not path.is_file():
            continue
        attrs = path.parent / ".zattrs"
        extra = b"\0" + attrs.read_bytes() if attrs.exists() else b""
        if path.name == "zarr.json":
            write("metadata", b"\0" + path.read_bytes())
        elif path.name == ".zarray":
            write("metadata", b"\1" + path.read_bytes() + extra)
        elif path.name == ".zgroup":
            write("metadata", b"\2" + path.read_bytes() + extra)
        elif path.name == ".zmetadata":
            write("metadata", b"\3" + path.read_bytes())


def store_seed(node):
    entries = b""
    for path in sorted(node.rglob("*")):
        if not path.is_file():
            continue
        key = path.relative_to(node).as_posix().encode()
        value = path.read_bytes()
        if len(key) > 255 or len(value) > 65535:
            return None
        entries += bytes([len(key)]) + key + len(value).to_bytes(2, "little") + value
        if len(entries) > 48 * 1024:
            return None
    return entries or None


def chunk_elements(grid, coords):
    """The elements chunk `coords` stores under a regular or rectilinear `chunk_grid`."""
    n = 1
    if grid["name"] == "regular":
        for edge in grid["configuration"]["chunk_shape"]:
            n *= edge
        return n
    for spec, c in zip(grid["configuration"]["chunk_shapes"], coords):
        if isinstance(spec, int):
            n *= spec
            continue
        edges = []
        for e in spec:
            edges += [e[0]] * e[1] if isinstance(e, list) else [e]
        n *= edges[c]
    return n


def chunk_seeds(store):
    for meta_path in store.rglob("zarr.json"):
        meta = json.loads(meta_path.read_text())
        if meta.get("node_type") != "array" or meta.get("data_type") not in ("string", "bytes"):
            continue
        names = [c["name"] for c in meta.get("codecs", [])]
        if names[:1] not in (["vlen-utf8"], ["vlen-bytes"]):
            continue
        codec = {(): 0, ("zstd",): 3, ("gzip",): 1, ("blosc",): 5}.get(tuple(names[1:]))
        if codec is None:
            continue
        selector = 0 if meta["data_type"] == "string" else 1
        root = meta_path.parent / "c"
        for chunk in root.rglob("*") if root.exists() else []:
            if chunk.is_file() and chunk.stat().st_size < 16 * 1024:
                coords = [int(p) for p in chunk.relative_to(root).parts]
                n = chunk_elements(meta["chunk_grid"], coords)
                if n < 256:
                    write("decode_chunk", bytes([selector, n, codec]) + chunk.read_bytes())


def v3_chunk_seeds(store):
    """decode_chunk's v3 mode: each v3 array's zarr.json and one of its small chunks, whatever
    its codec chain and data type (0xFF, the element count, the document's length, both)."""
    for meta_path in store.rglob("zarr.json"):
        meta = json.loads(meta_path.read_text())
        grid = meta.get("chunk_grid", {})
        if meta.get("node_type") != "array" or grid.get("name") != "regular":
            continue
        doc = meta_path.read_bytes()
        root = meta_path.parent / "c"
        chunks = sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
        for chunk in chunks[:1]:
            n = 1
            for size in grid["configuration"]["chunk_shape"]:
                n *= size
            if n < 256 and len(doc) < 65536 and chunk.stat().st_size < 16 * 1024:
                write("decode_chunk", bytes([0xFF, n]) + len(doc).to_bytes(2, "little") + doc
                      + chunk.read_bytes())


ICECHUNK_HEADER = 39


def icechunk_seeds():
    if shutil.which("zstd") is None:
        print("icechunk: no `zstd` command, no seeds")
        return
    for repo in sorted(FIXTURES.glob("*.icechunk")):
        for kind, bit in (("snapshots", 0), ("manifests", 1)):
            for index, path in enumerate(sorted((repo / kind).iterdir())):
                data = path.read_bytes()
                body = subprocess.run(["zstd", "-dcq"], input=data[ICECHUNK_HEADER:],
                                      capture_output=True, check=True).stdout
                selector = bit | ((index & 0x3F) << 1)
                write("icechunk", bytes([selector]) + body)
                write("icechunk", bytes([selector | 0x80]) + data[:ICECHUNK_HEADER] + body)


def main():
    for store in sorted(FIXTURES.glob("*.zarr")):
        metadata_seeds(store)
        chunk_seeds(store)
        v3_chunk_seeds(store)
        for node in [store, *sorted(p for p in store.rglob("*") if p.is_dir())]:
            seed = store_seed(node)
            if seed:
                write("open_store", seed)
    icechunk_seeds()
    for target in ("metadata", "open_store", "decode_chunk", "icechunk"):
        print(target, len(list((CORPUS / target).glob("*"))), "seeds")


if __name__ == "__main__":
    main()
