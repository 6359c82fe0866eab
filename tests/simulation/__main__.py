"""``python -m tests.simulation --seed N``: replay one seed and print what it did and found;
``--seeds K`` runs K seeds from N and prints the failing ones and the rate."""

from __future__ import annotations

import argparse
import logging
import sys

from tests.simulation.run import run_seed, run_seeds
from tests.simulation.world import STEPS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation")
    parser.add_argument("--seed", type=int, required=True, help="the seed to replay (the first one with --seeds)")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds to run from --seed")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--budget-s", type=float, default=3600.0, help="stop starting seeds after this long")
    parser.add_argument("--events", action="store_true", help="print each seed's faults")
    parser.add_argument("--trace", action="store_true", help="print each step as it runs (one seed)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)   # the broker's own refusals and recoveries: the history says what matters
    if args.seeds == 1:
        outcomes = [run_seed(args.seed, args.steps, args.trace)]
        elapsed = None
    else:
        outcomes, elapsed = run_seeds(args.seed, args.seeds, args.budget_s, args.steps)
    failed = [o for o in outcomes if o.anomalies]
    for outcome in outcomes:
        if outcome.anomalies or args.events or len(outcomes) == 1:
            print(f"seed {outcome.seed}: {outcome.flush_mode}, {outcome.steps} steps, {outcome.sent} sent, "
                  f"{outcome.acknowledged} acknowledged; faults: {', '.join(outcome.events) or 'none'}")
            for anomaly in outcome.anomalies:
                print(f"  {anomaly}")
    if elapsed is not None:
        print(f"{len(outcomes)} seeds in {elapsed:.1f} s ({len(outcomes) / elapsed:.1f} seeds/s), {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
