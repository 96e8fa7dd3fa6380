"""What a person runs: the Streamlit page's pieces (``page``), the terminal REPL (``repl``), and the
factory that builds a memory, its backend and the classroom's safeguards from secrets and the
environment (``settings``)."""
