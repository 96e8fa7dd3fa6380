"""The tests' support: fake backends that record what they were sent (fakes), local model servers (servers,
llama_server), processes, and helpers for memories, pages, browsers, stores and faults. Test modules import from
here, never from each other."""
