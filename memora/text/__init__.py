"""The words everything else is made of: a message and the article's prompts (``messages``,
``prompts``), counting their tokens offline or by the API (``tokens``), the margin learned per kind
of text (``calibration``), and the ledger of what each model request used (``usage``). Nothing here
imports another part of memora."""
