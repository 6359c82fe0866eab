"""``python -m perf``: the end-to-end benchmark runner (see perf/e2e.py)."""

# Guarded: multiprocessing's spawn re-imports the main module as __mp_main__.
if __name__ == "__main__":
    from perf.e2e import main

    raise SystemExit(main())
