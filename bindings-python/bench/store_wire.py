"""What the shared store's wire format costs the Python driver per operation: draining a
``Reserve`` output from the limiter, encoding it when ``RedisStore`` queues it, the ARGV of a batch of 26 (the mean batch of
a K = 4 ``global_cap`` run), and reading a grant. The encoding and the reading are the core's
(``ratelane::shared::wire``). Best of 5, microseconds.

    .venv-py-test/bin/python bindings-python/bench/store_wire.py
"""
import json
import timeit

from ratelane import _core as core
from ratelane.redis import store_op


def best(f, n: int) -> float:
    return min(timeit.repeat(f, number=n, repeat=5)) / n * 1e6


def main() -> None:
    limiter = core.Limiter(json.dumps({"global_limit": 0, "invalid_request_limit": 0, "shared": {}}))
    headers = [("X-RateLimit-Limit", "1000000"), ("X-RateLimit-Remaining", "999999"),
               ("X-RateLimit-Reset-After", "1.000"), ("X-RateLimit-Bucket", "80c17d2f203122d936070c88c8d10f33")]
    now = [0]

    def life() -> object:
        """One request life in shared mode: its Reserve, the grant, its Send, the answer and
        the ShareBucket it reports, 1 ms apart."""
        now[0] += 10**6
        rid = limiter.enqueue(now[0], "POST", "/channels/123/messages")
        reserved = limiter.drain()[0]
        limiter.handle_reservation(now[0], rid, "granted")
        limiter.drain()
        limiter.handle_response(now[0], rid, 200, headers)
        limiter.drain()
        return reserved

    reserve = life()
    assert type(reserve).__name__ == "Reserve", reserve
    reply = [b"granted", 3, 2, 1795812403404294]

    def batch() -> list:
        return core.store_argv("proc-1", 30 * 10**9, 50 * 10**6, 600 * 10**9, [store_op(reserve) for _ in range(26)])

    print(f"a request life in shared mode (no I/O)  {best(life, 20_000):.2f} us")
    print(f"encode one Reserve output (store_op)     {best(lambda: store_op(reserve), 200_000):.2f} us")
    per_call = best(batch, 20_000)
    print(f"26 reservations, queued and batched     {per_call:.1f} us per call, {per_call / 26:.2f} us per op")
    print(f"read one grant (store_answer)            {best(lambda: core.store_answer(reply), 200_000):.2f} us")


if __name__ == "__main__":
    main()
