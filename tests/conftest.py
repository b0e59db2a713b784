"""Shared test setup."""
import signal

# A shell that starts a job in the background (`cmd &`, nohup) hands it SIGINT ignored, and Python then keeps it
# ignored. The tests that send themselves a Ctrl-C, or check what a child process inherits, need Python's usual
# handler, which is what an interactive run has.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
