"""What the shared store's wire format costs the Python driver per operation: encoding a
``Reserve`` output when ``RedisStore`` queues it, the ARGV of a batch of 26 (the mean batch of
a K = 4 ``global_cap`` run), and reading a grant. The encoding and the reading are the core's
(``ratelane::shared::wire``). Best of 5, microseconds.

    .venv-py-test/bin/python bindings-python/bench/store_wire.py
"""
import json
import timeit

from ratelane import _core as core


def best(f, n: int) -> float:
    return min(timeit.repeat(f, number=n, repeat=5)) / n * 1e6


def main() -> None:
    limiter = core.Limiter(json.dumps({"global_limit": 50, "shared": {}}))
    limiter.enqueue(0, "POST", "/channels/123/messages")
    reserve = limiter.poll_output()
    assert type(reserve).__name__ == "Reserve", reserve
    reply = [b"granted", 3, 2, 1795812403404294]

    def batch() -> list:
        return core.store_argv("proc-1", 30 * 10**9, 50 * 10**6, 600 * 10**9, [core.store_op(reserve) for _ in range(26)])

    print(f"encode one Reserve output (store_op)     {best(lambda: core.store_op(reserve), 200_000):.2f} us")
    per_call = best(batch, 20_000)
    print(f"26 reservations, queued and batched     {per_call:.1f} us per call, {per_call / 26:.2f} us per op")
    print(f"read one grant (store_answer)            {best(lambda: core.store_answer(reply), 200_000):.2f} us")


if __name__ == "__main__":
    main()
