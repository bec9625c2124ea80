#!/bin/bash
# An app whose child leaves the app's process group and session (setsid) and keeps forking short-lived sleeps as fast as it can, for
# the suspension tests (Tests/IntegrationTests/SetsidSuspensionTests.swift): a signal to the app's group never
# reaches them, and a list of members read before a stop misses the ones forked after it. bash, not sh: dash
# vforks, and a parent waiting for a stopped vfork child waits in D, never in T. Run with Protocol=none.
setsid bash -c 'while :; do sleep 0.5 & done' &
exec sleep infinity
