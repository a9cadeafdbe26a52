"""Child process of the cross-process counter test: opens a store by 'module:attr' and conf, waits
for the go line on stdin (so every child counts at the same time), increments a counter n times
and prints the values it got, as JSON."""

from __future__ import annotations

import json
import sys

from tuplemesh.plugins import import_from_string


def main(store_class: str, conf_json: str, topology: str, counter: str, times: str) -> None:
    store = import_from_string(store_class).from_conf(json.loads(conf_json))
    print("ready", flush=True)
    sys.stdin.readline()
    values = [store.increment(topology, counter) for _ in range(int(times))]
    store.close()
    print(json.dumps(values), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
