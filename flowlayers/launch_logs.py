"""The launcher's output: every process's lines, prefixed ``[process i]``, without the engines' own chatter.

A job of several processes should read like one job: ``fit``'s progress bar is shown by process 0 only
(``flow.env.speaks``), and the lines engines print for themselves at start-up are kept out unless ``--verbose``
asks for them.  Those lines are written by the engines' C++ code straight to the process's stdout or stderr, below
any log level a variable can set: absl's notice before its logging starts, its INFO and WARNING lines
(``I0000 00:00:17.5 123 port.cc:153] oneDNN custom operations are on``; errors and fatal ones are kept), and Gloo's
``[Gloo] Rank 1 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3``, which threads of
one process print at once, interleaved at the pieces of the message.  A line is dropped only when it is made of
those pieces alone: a user's text mixed into it keeps it.
"""
import re

ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
ABSL_LINE = re.compile(rb"[IW]\d{4} [\d:.]+\s+\d+ [\w.\-/]+:\d+\] ")
GLOO_PIECES = re.compile(rb"\[Gloo\] Rank | is connected to | peer ranks\. ?|Expected number of connected peer "
                         rb"ranks is : ")


def chatter(line):
    """Whether ``line`` (bytes, without its newline) is only an engine talking to itself."""
    line = line.rstrip(b"\r\n")
    if line == ABSL_NOTICE or ABSL_LINE.match(line):
        return True
    if b"[Gloo]" not in line and b"peer ranks" not in line:
        return False
    rest = GLOO_PIECES.sub(b" ", line)
    return rest.strip(b" 0123456789") == b""


def pump(stream, prefix, out, lock, verbose):
    """Copy ``stream``'s lines to ``out`` with ``prefix``, leaving out chatter unless ``verbose``."""
    for line in iter(stream.readline, b""):
        if verbose or not chatter(line):
            with lock:
                out.write(prefix + line)
                out.flush()
    stream.close()
