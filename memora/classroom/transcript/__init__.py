"""A conversation as a file: the transcript format, exported and strictly imported (``format``), and
the safe reading of any untrusted JSON (``untrusted``), which probe scenarios use too."""
