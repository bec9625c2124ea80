#!/usr/bin/env python3
"""Runs COMMAND in a child with only descriptors 0, 1 and 2 open, for the descriptor-hygiene tests
(Tests/IntegrationTests/HygieneTests.swift): every other descriptor of the child is then one it opened itself.

This process keeps what it inherited (Foundation's Process learns of a child's exit when a socket it left open
in the child closes, so closing it here would make the test runner believe the daemon had exited). It forwards
SIGTERM, SIGINT and SIGHUP to the child, and exits with the child's status. The child's pid is the one in
/proc/SELF/task/SELF/children.

usage: clean_fds.py COMMAND ARGS...
"""
import os, signal, sys

signal.pthread_sigmask(signal.SIG_SETMASK, [])  # a test runner's worker thread blocks nearly everything
child = os.fork()
if child == 0:
    os.closerange(3, 1 << 16)
    os.execv(sys.argv[1], sys.argv[1:])
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, lambda received, _: os.kill(child, received))
while True:
    try:
        _, status = os.waitpid(child, 0)
        break
    except InterruptedError:
        continue
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
