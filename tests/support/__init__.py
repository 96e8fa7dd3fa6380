"""The tests' support: fake backends that record what they were sent (fakes), and helpers for memories, pages,
stores, budgets and faults. Test modules import from here, never from each other; the local model servers, llama.cpp,
processes and Chromium that the benchmarks drive too are in ``benchmarks/harness/``."""
