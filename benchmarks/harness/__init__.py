"""What the benchmarks and the tests both drive: local model servers that speak the APIs' wire formats (``servers``),
llama.cpp's own server (``llama_server``), server processes (``processes``) and Chromium (``browser``).

It lives here, not in ``tests/support/``, so that no benchmark imports from ``tests/``; the tests import it from
here. Where a tool is missing, its helper skips the test (fails it when ``CI`` is set), as pytest does; a benchmark
run outside pytest stops there with the same reason.
"""
