"""``python -m rocketbox.perf``: the end-to-end benchmark runner (perf/runner.py; scenarios in perf/scenarios/)."""

# Guarded: multiprocessing's spawn re-imports the main module as __mp_main__.
if __name__ == "__main__":
    from rocketbox.perf.runner import main

    raise SystemExit(main())
