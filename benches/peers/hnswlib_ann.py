"""hnswlib on the workload of benches/hnsw_ann.rs, for comparison with the store's index.

Reads the dataset that `cargo bench -p waypoint-benches --bench hnsw_ann` writes
(target/hnsw_ann/dataset.bin: 100,000 x 128 float32 vectors, 1,000 queries and their exact
10 nearest neighbours), builds an hnswlib L2 index with M=16, ef_construction=200 on one
thread, and for each ef prints single-thread queries/s and recall@10 as a Markdown table.

queries/s is measured two ways, both on one thread: one `knn_query` call per query (what a
server answering single requests does; includes Python call overhead of a few microseconds)
and one call for all 1,000 queries with `num_threads=1` (hnswlib's C++ loop alone). Each is
the best of 3 passes, as the Rust bench reports.

    python3 -m venv target/venv-hnswlib
    target/venv-hnswlib/bin/pip install hnswlib numpy   # hnswlib 0.8.0, built from source
    cargo bench -p waypoint-benches --bench hnsw_ann    # writes the dataset
    target/venv-hnswlib/bin/python benches/peers/hnswlib_ann.py   # from the repo root

pip builds hnswlib from source with -march=native, so it uses every SIMD extension of the
machine; the Rust side gets AVX2/AVX-512 only in the distance kernel (runtime dispatch).
"""

import argparse
import platform
import sys
import time
from importlib import metadata

import numpy as np

import hnswlib

EF_SWEEP = [10, 16, 24, 32, 48, 64, 96, 128, 256]
M = 16
EF_CONSTRUCTION = 200


def read_dataset(path):
    buf = open(path, "rb").read()
    if buf[:8] != b"WPANN001":
        sys.exit(f"{path}: not a hnsw_ann dataset")
    n, d, nq, k = (int(x) for x in np.frombuffer(buf, dtype="<u4", count=4, offset=8))
    off = 24
    data = np.frombuffer(buf, dtype="<f4", count=n * d, offset=off).reshape(n, d)
    off += n * d * 4
    queries = np.frombuffer(buf, dtype="<f4", count=nq * d, offset=off).reshape(nq, d)
    off += nq * d * 4
    truth = np.frombuffer(buf, dtype="<u4", count=nq * k, offset=off).reshape(nq, k)
    return data, queries, truth, k


def best_of(runs, f):
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - start)
    return best, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="target/hnsw_ann/dataset.bin")
    args = parser.parse_args()

    data, queries, truth, k = read_dataset(args.data)
    n, d = data.shape
    print(
        f"Python {platform.python_version()}, hnswlib {metadata.version('hnswlib')}, "
        f"numpy {np.__version__}; {n} x {d}, {len(queries)} queries"
    )

    index = hnswlib.Index(space="l2", dim=d)
    index.init_index(max_elements=n, ef_construction=EF_CONSTRUCTION, M=M, random_seed=100)
    index.set_num_threads(1)
    start = time.perf_counter()
    index.add_items(data, np.arange(n))
    build = time.perf_counter() - start
    print(f"build (M {M}, ef_construction {EF_CONSTRUCTION}, 1 thread): {build:.2f} s")

    rows = []
    for ef in EF_SWEEP:
        index.set_ef(ef)
        single, _ = best_of(3, lambda: [index.knn_query(q, k=k) for q in queries])
        batch, (labels, _) = best_of(3, lambda: index.knn_query(queries, k=k, num_threads=1))
        recall = np.mean([len(set(labels[i]) & set(truth[i])) / k for i in range(len(queries))])
        rows.append((ef, len(queries) / single, len(queries) / batch, recall))

    print()
    print("| ef | queries/s, one call each | queries/s, one batch call | recall@10 |")
    print("|---:|---:|---:|---:|")
    for ef, single, batch, recall in rows:
        print(f"| {ef} | {single:.0f} | {batch:.0f} | {recall:.4f} |")


if __name__ == "__main__":
    main()
