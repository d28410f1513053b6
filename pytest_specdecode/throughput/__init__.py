"""Throughput benchmarking: cases (workload), load rounds (load, aioload), metrics,
comparison, lossless checks. Import the submodule you need: the load client pulls in
aiohttp, which a run without throughput cases never needs."""
