"""``attnkit serve``: the JSON API and the attention page over one or more checkpoints (FastAPI + uvicorn)."""

from __future__ import annotations

import argparse
import os
import sys

from ..bounds import Bound
from ..plugin.flags import bounded, device, positive_int

MILLISECONDS = Bound(float, 0.0, 60_000.0)  # a batcher's wait: up to a minute

NAME = "serve"


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="serve translation, attention, generation and classification over HTTP (needs attnkit[serve])",
    )
    p.add_argument(
        "--checkpoint",
        action="append",
        required=True,
        metavar="[NAME=]PATH",
        help="a checkpoint to serve; repeat for several "
        "(named after the file, or its folder for checkpoint_*.pt)",
    )
    _add_network_flags(p)
    _add_batching_flags(p)
    _add_decoding_flags(p)


def _add_network_flags(p) -> None:
    """Where it listens, who may call it and how long a request may take."""
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    p.add_argument(
        "--port", type=bounded(Bound(int, 1, 65535), "port"), default=8080, help="TCP port (default 8080)"
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name the Host header may carry besides the bound address (and localhost for a loopback "
        "one): a domain the server is reached by; repeat for several, '*' for any. Others get 400 "
        "(DNS rebinding protection)",
    )
    p.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a key every request but /health must bear (Authorization: Bearer KEY); repeat for "
        "several. Anyone on the machine sees it in the process list: prefer ATTNKIT_API_KEYS or the "
        "next flag (keys read from a list)",
    )
    p.add_argument(
        "--api-key-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a file of accepted keys, one a line (# comments); repeat for several",
    )
    for flag, what in (
        ("--max-requests-per-key", "requests in flight"),
        ("--max-queued-tokens-per-key", "source tokens waiting or decoding"),
    ):
        p.add_argument(
            flag,
            type=bounded(Bound(int, 0, 10**9)),
            default=0,
            metavar="N",
            help=f"at most N {what} at once for one key (without keys: for all requests together); "
            "past it 429 with Retry-After (default 0: no limit)",
        )
    p.add_argument(
        "--request-timeout",
        type=bounded(Bound(float, 0.0, 86_400.0, open_low=True)),
        default=120.0,
        metavar="SECONDS",
        help="a request not decoded by then answers 504, and a decoding process that answered nothing "
        "for as long is restarted; SIGTERM waits for requests in flight at most this long (default 120)",
    )
    p.add_argument(
        "--max-sentences", type=positive_int, default=256, help="sentences per request (default 256)"
    )
    p.add_argument(
        "--max-body-bytes", type=positive_int, default=1_000_000, help="request body size (default 1000000)"
    )


def _add_batching_flags(p) -> None:
    """How requests share a model call: serve.batcher.Batching's fields, with its defaults."""
    from ..serve.batcher import Batching  # torch-free, as --help must be

    d = Batching()
    p.add_argument(
        "--max-batch-tokens",
        type=positive_int,
        default=d.max_batch_tokens,
        help="source tokens decoding together: in one running beam search, "
        f"or one batched call (default {d.max_batch_tokens})",
    )
    p.add_argument(
        "--max-wait-ms",
        type=bounded(MILLISECONDS),
        default=d.max_wait_ms,
        help=f"how long a request waits for others to share its model call (default {d.max_wait_ms:g})",
    )
    p.add_argument(
        "--max-gap-ms",
        type=bounded(MILLISECONDS),
        default=d.max_gap_ms,
        help="... but no longer once this long passes with no other request arriving (default "
        f"{d.max_gap_ms:g}; a gap as long as --max-wait-ms keeps the whole wait)",
    )
    p.add_argument(
        "--join-group",
        type=positive_int,
        default=d.join_group,
        help="newcomers join a running beam search once this many sentences wait "
        f"(default {d.join_group}) ...",
    )
    p.add_argument(
        "--join-wait-steps",
        type=bounded(Bound(int, 0, 100_000)),
        default=d.join_wait_steps,
        help="... or once the oldest has waited this many decoding steps "
        f"(default {d.join_wait_steps}; 0: join at once)",
    )


def _add_decoding_flags(p) -> None:
    """What decodes, where and how."""
    p.add_argument(
        "--device", type=device, default="auto", help="auto, cpu, cuda, cuda:N or mps (default auto)"
    )
    p.add_argument(
        "--workers",
        type=workers,
        default="auto",
        help="decoding processes side by side, each with its own copy of the models (default auto: on a CPU "
        "one per core, at most 4; on a GPU one)",
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        help="CPU threads of each decoding process (default: the cores divided among the workers), or of "
        "the server's process with --decoder thread (default: torch's)",
    )
    p.add_argument(
        "--engine",
        choices=("torch", "ctranslate2", "auto"),
        default="torch",
        help="what decodes /v1/translate: torch (default), CTranslate2 (exported once into "
        "CHECKPOINT.ct2/ beside each translation checkpoint; /v1/attention and the page stay on "
        "torch), or auto: CTranslate2 where it finds the same tokens, what it refuses (sampling) on "
        "torch, and torch for a model it cannot hold (the choice said on stderr)",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch on a GPU: translation models decode through their step compiled by torch.compile "
        "and replayed from CUDA graphs, requests as whole batches (the first step of each new size "
        "of rows and lengths waits for its compile, announced on stderr); refused on a CPU, where "
        "--engine ctranslate2 is the fast path",
    )
    p.add_argument(
        "--decoder",
        choices=("process", "thread"),
        default="process",
        help="where the models run: a decoding process of their own (default; HTTP work and decoding "
        "then use separate cores), or a thread of the server's process (one copy of the weights)",
    )


def workers(text: str) -> int | str:
    """An argparse type: ``auto`` or a number of processes up to the machine's cores (``.bound``)."""
    if text == "auto":
        return text
    try:
        return int(WORKERS.parse(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected auto or a number of processes from 1 to {WORKERS.high} (cores), got {text!r}"
        ) from None


WORKERS = Bound(int, 1, os.cpu_count() or 1)  # each holds the models: no more than the cores
workers.bound = WORKERS  # type: ignore[attr-defined]


def run(args) -> None:
    from ..errors import ConfigError

    try:
        import uvicorn

        from ..plugin.http import Limits
        from ..serve.app import create_app
    except ImportError as e:
        raise ConfigError(
            f"attnkit serve needs the serve extra: pip install 'attnkit[serve]' ({e})"
        ) from None
    from ..serve.guards import allowed_host_names

    _check_flags(args)
    from ..serve.keys import Quota, read_keys

    api_keys = read_keys(args.api_key, args.api_key_file)  # before loading: a bad key is one line now
    import torch

    n_workers, threads = _workers_and_threads(
        args.workers, args.threads, args.device, torch.get_num_threads()
    )
    if args.threads:
        torch.set_num_threads(args.threads)
    from ..serve.batcher import Batching

    batching = Batching(
        max_batch_tokens=args.max_batch_tokens,
        max_wait_ms=args.max_wait_ms,
        max_gap_ms=args.max_gap_ms,
        join_group=args.join_group,
        join_wait_steps=args.join_wait_steps,
    )
    models, decoder = _models_and_decoder(args, batching, n_workers, threads)
    limits = Limits(max_body_bytes=args.max_body_bytes, max_sentences=args.max_sentences)
    app = create_app(
        models,
        batching=batching,
        limits=limits,
        decoder=decoder,
        request_timeout=args.request_timeout,
        allowed_hosts=allowed_host_names(args.host, args.allowed_host),
        api_keys=api_keys,
        quota=Quota(args.max_requests_per_key, args.max_queued_tokens_per_key),
        say=lambda message: print(f"attnkit serve: {message}", file=sys.stderr, flush=True),
    )
    _announce(args, models, api_keys)
    # uvicorn handles SIGTERM and SIGINT: it stops accepting, lets in-flight requests finish (each
    # answers by its deadline, and is cancelled shortly after), then runs the app's shutdown (which
    # drains the batcher, in the decoding process if any, killing one not done in time) and returns.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(args.request_timeout) + 2,
    )


def _announce(args, models, api_keys: tuple[bytes, ...]) -> None:
    """The line saying what is served where, and whether it asks for a key (never which)."""
    names = ", ".join(f"{m.name} ({m.task})" for m in models)
    guarded = f"{len(api_keys)} API key(s) accepted" if api_keys else "no API key: anyone who reaches it"
    print(
        f"attnkit serve: {names} on http://{args.host}:{args.port}/ (API docs at /docs; {guarded})",
        flush=True,
    )


def _check_flags(args) -> None:
    """Every flag the parser cannot check alone, and the address, before anything is loaded."""
    from ..errors import ConfigError

    if args.workers != "auto" and args.workers > 1 and args.decoder != "process":
        raise ConfigError("--workers needs --decoder process (the thread decoder is one worker)")
    if args.compile and args.engine == "ctranslate2":
        raise ConfigError("--compile is for --engine torch (CTranslate2 runs its own kernels)")
    _check_address(args.host, args.port)
    if args.compile:
        from ..decoding.compiled import refuse_on_cpu
        from ..device import resolve_device

        refuse_on_cpu(resolve_device(args.device))


def _models_and_decoder(args, batching, n_workers: int, threads: int):  # batching: Batching
    """The served models, and the decoding processes that run them (None: a thread of this process)."""
    from ..serve.decoder import ProcessDecoder, WorkerSpec
    from ..serve.tasks import load_models, read_checkpoints, release_weights

    # Read once: the server serves these bytes for its whole life, and a decoding process that
    # restarts loads them too, never a file overwritten (or moved) since.
    contents = read_checkpoints(args.checkpoint)
    decoder = None
    if args.decoder == "process":  # the decoding process loads the models on the device; here they
        # only check requests (names, tasks, token counts), so they load on the CPU and drop their weights
        models = load_models(
            args.checkpoint,
            device="cpu",
            contents=contents,
            engine=args.engine,
            load_engine=False,
            compile=args.compile,  # refused here, in one line, for a model the step cannot decode
        )  # exported here, once, before the decoding processes load the export
        release_weights(models)
        spec = WorkerSpec(
            tuple(args.checkpoint), args.device, threads, contents, engine=args.engine, compile=args.compile
        )
        decoder = ProcessDecoder(spec, workers=n_workers, batching=batching)
    else:
        models = load_models(
            args.checkpoint,
            device=args.device,
            contents=contents,
            engine=args.engine,
            threads=args.threads,
            compile=args.compile,
        )
    del contents  # the decoding processes have their copies (the spec keeps one for restarts)
    return models, decoder


def _workers_and_threads(asked: int | str, threads: int | None, device: str, cores: int) -> tuple[int, int]:
    """How many decoding processes, with how many threads each. A server's decoding steps carry a few
    sentences, too small for a second thread to pay (measured on 2 cores, 16 clients: one process with
    2 threads answered 69-81 sentences/s, with one thread 104-124, two one-thread processes 129-146;
    docs/BENCHMARKS.md), so on a CPU ``auto`` runs one process per core, at most 4 (each holds a copy
    of the weights), with the cores divided among them: single-threaded on up to 4 cores. On a GPU, one."""
    from ..device import resolve_device

    if isinstance(asked, int):
        n = asked
    else:  # "auto", the one word workers() takes
        n = 1 if resolve_device(device).type != "cpu" else max(1, min(4, cores))
    return n, threads or max(1, cores // n)


def _check_address(host: str, port: int) -> None:
    """Fail early, in one line, when the address cannot be listened on (uvicorn would log and exit 1)."""
    import socket

    from ..errors import ConfigError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            s.bind(infos[0][4])
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
