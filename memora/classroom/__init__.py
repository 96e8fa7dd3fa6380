"""The classroom's safeguards around a shared page: the lock and the caps of one conversation
(``limits``), the server-wide token budget, booked before each request (``server_budget``, and
``postgres_ledger`` where several processes share it), and the backend behind them (``guard``)."""
