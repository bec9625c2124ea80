#!/bin/sh
# An app whose first act is to append the cgroup2 line of its own /proc/self/cgroup ("0::/PATH") to the file $1, with
# shell builtins alone, so that the line is this very process's; then it sleeps until killed.
while IFS= read -r line; do
    case $line in 0::*) echo "$line" >> "$1" ;; esac
done < /proc/self/cgroup
exec sleep 300
