"""``cluster tls``: a self-signed certificate and key for this box's doors (``tls.make_self_signed``),
in ``<data dir>/tls/`` unless ``--out`` says where; ``cluster up --tls-mode enforcing`` then uses
them. Clients trust that certificate itself (``ClientConfig.tls_trust_cert_path``; a gRPC client's
root certificates)."""

from __future__ import annotations

import sys

from rocketbox.cluster.tls import CERT_DAYS_DEFAULT, make_self_signed, tls_directory


def cmd_tls(args) -> int:
    directory = args.out or tls_directory(args.data_dir)
    try:
        cert, key = make_self_signed(directory, tuple(args.host or ()), days=args.days, overwrite=args.force)
    except FileExistsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"certificate: {cert} (for 127.0.0.1, localhost{''.join(', ' + h for h in args.host or ())}; "
          f"{args.days} days)")
    print(f"key:         {key} (mode 0600)")
    flags = "" if args.out is None else f" --tls-cert {cert} --tls-key {key}"
    print(f"serve with:  cluster up --tls-mode enforcing{flags}   (or permissive: TLS and plain TCP on one port)")
    return 0


def add_parsers(sub) -> None:
    tls = sub.add_parser("tls", help="make a self-signed TLS certificate and key for this box (<data dir>/tls/)")
    tls.add_argument("--host", action="append", help="another name or address the certificate covers "
                                                     "(repeatable; 127.0.0.1 and localhost always)")
    tls.add_argument("--out", help="the directory to write server.crt and server.key to (default <data dir>/tls)")
    tls.add_argument("--days", type=int, default=CERT_DAYS_DEFAULT, help=f"validity (default {CERT_DAYS_DEFAULT})")
    tls.add_argument("--force", action="store_true", help="replace a pair already there")
    tls.set_defaults(func=cmd_tls)
