"""What a shared deployment adds around the memory: each conversation kept between visits
(``store``, ``transcript``), its caps (``limits``), the server-wide token budget booked before each
request (``server_budget``, and ``postgres_ledger`` where several processes share it) with the
backend behind it (``guard``), and the replies of one server process: one on its own thread
(``job``), found again by a reload (``flights``), drained at a stop (``shutdown``). Nothing here
imports Streamlit."""
