"""Replies that outlive a rerun: one on its session's own thread (``job``), this process's replies in
flight by conversation (``flights``, so a reload can take one over), and what a SIGTERM waits for and
keeps (``shutdown``)."""
