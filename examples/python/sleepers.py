"""N coroutines, each asyncio.sleep(10), all awaited with asyncio.gather: the Python asyncio
program of async-runtimes-benchmarks-2024 ("Take 2", hez2010), which published 19.5 / 33.3 /
146.5 / 1275.7 MB at 1 / 10,000 / 100,000 / 1,000,000 tasks on Python 3.13. Like the article's,
it gathers the bare sleep coroutines (gather makes each a Task) and has no knob for the 10 s.

    python3 sleepers.py N
"""

import asyncio
import sys


async def main(n):
    sleeps = [asyncio.sleep(10) for _ in range(n)]
    await asyncio.gather(*sleeps)


if __name__ == "__main__":
    try:
        n = int(sys.argv[1])
    except (IndexError, ValueError):
        n = 0
    if n < 1:
        print("usage: python3 sleepers.py N (a whole number of tasks, at least 1)", file=sys.stderr)
        sys.exit(2)
    asyncio.run(main(n))
