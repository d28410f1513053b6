"""The simulated model's own solutions, part 2: lists, dicts, numbers, recursion.

Same shape as :mod:`pytest_specdecode.sim.solutions`: up to two correct
solutions and up to two plausibly buggy ones per problem.
"""

from __future__ import annotations

from pytest_specdecode.sim.solutions import Fixed, by_name

SOLVERS = by_name(
    Fixed(
        correct=(
            """\
def flatten(items: list) -> list[int]:
    out: list[int] = []
    stack = [iter(items)]
    while stack:
        for x in stack[-1]:
            if isinstance(x, list):
                stack.append(iter(x))
                break
            out.append(x)
        else:
            stack.pop()
    return out
""",
            """\
def flatten(items: list) -> list[int]:
    def walk(xs: list):
        for x in xs:
            if isinstance(x, list):
                yield from walk(x)
            else:
                yield x

    return list(walk(items))
""",
        ),
        wrong=(
            # Flattens one level only.
            """\
def flatten(items: list) -> list[int]:
    out = []
    for x in items:
        if isinstance(x, list):
            out.extend(x)
        else:
            out.append(x)
    return out
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def has_pair_with_sum(nums: list[int], target: int) -> bool:
    ordered = sorted(nums)
    lo, hi = 0, len(ordered) - 1
    while lo < hi:
        total = ordered[lo] + ordered[hi]
        if total == target:
            return True
        if total < target:
            lo += 1
        else:
            hi -= 1
    return False
""",
            """\
from collections import Counter


def has_pair_with_sum(nums: list[int], target: int) -> bool:
    counts = Counter(nums)
    for x in counts:
        y = target - x
        if y in counts and (y != x or counts[x] > 1):
            return True
    return False
""",
        ),
        wrong=(
            # Pairs an element with itself.
            """\
def has_pair_with_sum(nums: list[int], target: int) -> bool:
    values = set(nums)
    return any(target - x in values for x in nums)
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def binary_search(items: list[int], target: int) -> int:
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < len(items) and items[lo] == target else -1
""",
            """\
from bisect import bisect_left


def binary_search(items: list[int], target: int) -> int:
    i = bisect_left(items, target)
    if i != len(items) and items[i] == target:
        return i
    return -1
""",
        ),
        wrong=(
            # The loop condition skips a one-element range.
            """\
def binary_search(items: list[int], target: int) -> int:
    lo, hi = 0, len(items) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def max_subarray_sum(nums: list[int]) -> int:
    best = nums[0]
    prefix = 0
    lowest = 0
    for x in nums:
        prefix += x
        best = max(best, prefix - lowest)
        lowest = min(lowest, prefix)
    return best
""",
            """\
def max_subarray_sum(nums: list[int]) -> int:
    best = running = nums[0]
    for x in nums[1:]:
        running = running + x if running > 0 else x
        if running > best:
            best = running
    return best
""",
        ),
        wrong=(
            # Treats the empty slice as allowed: all-negative lists give 0.
            """\
def max_subarray_sum(nums: list[int]) -> int:
    best = running = 0
    for x in nums:
        running = max(0, running + x)
        best = max(best, running)
    return best
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def chunk(items: list[int], size: int) -> list[list[int]]:
    out = []
    start = 0
    while start < len(items):
        out.append(items[start : start + size])
        start += size
    return out
""",
            """\
from itertools import islice


def chunk(items: list[int], size: int) -> list[list[int]]:
    it = iter(items)
    return list(iter(lambda: list(islice(it, size)), []))
""",
        ),
        wrong=(
            # Drops a short last chunk.
            """\
def chunk(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items) - size + 1, size)]
""",
        ),
    ),
    Fixed(
        correct=(
            """\
from collections import deque


def rotate_right(items: list[int], k: int) -> list[int]:
    d = deque(items)
    d.rotate(k)
    return list(d)
""",
            """\
def rotate_right(items: list[int], k: int) -> list[int]:
    n = len(items)
    return [items[(i - k) % n] for i in range(n)]
""",
        ),
        wrong=(
            # k is not reduced modulo the length.
            """\
def rotate_right(items: list[int], k: int) -> list[int]:
    if not items or k == 0:
        return list(items)
    return items[-k:] + items[:-k]
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def dedupe(items: list[int]) -> list[int]:
    seen = set()
    out = []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
""",
            """\
def dedupe(items: list[int]) -> list[int]:
    return [x for i, x in enumerate(items) if x not in items[:i]]
""",
        ),
        wrong=(
            # Loses the original order.
            """\
def dedupe(items: list[int]) -> list[int]:
    return sorted(set(items))
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def invert_dict(d: dict[str, int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for key in sorted(d):
        out.setdefault(d[key], []).append(key)
    return out
""",
            """\
from collections import defaultdict


def invert_dict(d: dict[str, int]) -> dict[int, list[str]]:
    groups = defaultdict(list)
    for key, value in d.items():
        groups[value].append(key)
    return {value: sorted(keys) for value, keys in groups.items()}
""",
        ),
        wrong=(
            # A later key overwrites an earlier one with the same value.
            """\
def invert_dict(d: dict[str, int]) -> dict[int, list[str]]:
    return {value: [key] for key, value in d.items()}
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def second_largest(nums: list[int]) -> int | None:
    first = second = None
    for x in nums:
        if first is None or x > first:
            first, second = x, first
        elif x != first and (second is None or x > second):
            second = x
    return second
""",
            """\
def second_largest(nums: list[int]) -> int | None:
    distinct = set(nums)
    if len(distinct) < 2:
        return None
    distinct.remove(max(distinct))
    return max(distinct)
""",
        ),
        wrong=(
            # Ignores "distinct": a repeated maximum is returned.
            """\
def second_largest(nums: list[int]) -> int | None:
    if len(nums) < 2:
        return None
    return sorted(nums)[-2]
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def primes_up_to(n: int) -> list[int]:
    primes: list[int] = []
    for candidate in range(2, n + 1):
        for p in primes:
            if p * p > candidate:
                primes.append(candidate)
                break
            if candidate % p == 0:
                break
        else:
            primes.append(candidate)
    return primes
""",
            """\
def primes_up_to(n: int) -> list[int]:
    if n < 2:
        return []
    composite = bytearray(n + 1)
    p = 2
    while p * p <= n:
        if not composite[p]:
            for multiple in range(p * p, n + 1, p):
                composite[multiple] = 1
        p += 1
    return [k for k in range(2, n + 1) if not composite[k]]
""",
        ),
        wrong=(
            # Excludes n itself.
            """\
def primes_up_to(n: int) -> list[int]:
    return [k for k in range(2, n) if all(k % d for d in range(2, int(k**0.5) + 1))]
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def hanoi_moves(n: int) -> list[tuple[str, str]]:
    pegs: dict[str, list[int]] = {"A": list(range(n, 0, -1)), "B": [], "C": []}
    # Cycling through these peg pairs, always making the one legal move, solves it.
    near, far = ("C", "B") if n % 2 else ("B", "C")
    order = [("A", near), ("A", far), (near, far)]
    moves = []
    for step in range(2**n - 1):
        x, y = order[step % 3]
        if pegs[x] and (not pegs[y] or pegs[x][-1] < pegs[y][-1]):
            pegs[y].append(pegs[x].pop())
            moves.append((x, y))
        else:
            pegs[x].append(pegs[y].pop())
            moves.append((y, x))
    return moves
""",
            """\
def hanoi_moves(n: int) -> list[tuple[str, str]]:
    moves: list[tuple[str, str]] = []

    def move(k: int, source: str, target: str, spare: str) -> None:
        if k:
            move(k - 1, source, spare, target)
            moves.append((source, target))
            move(k - 1, spare, target, source)

    move(n, "A", "C", "B")
    return moves
""",
        ),
        wrong=(
            # The second recursive call swaps target and spare.
            """\
def hanoi_moves(n: int) -> list[tuple[str, str]]:
    moves: list[tuple[str, str]] = []

    def move(k: int, source: str, target: str, spare: str) -> None:
        if k:
            move(k - 1, source, spare, target)
            moves.append((source, target))
            move(k - 1, spare, source, target)

    move(n, "A", "C", "B")
    return moves
""",
        ),
    ),
    Fixed(
        correct=(
            """\
import re

_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_ADDRESS = re.compile("[.]".join([_OCTET] * 4))


def is_valid_ipv4(s: str) -> bool:
    return _ADDRESS.fullmatch(s) is not None
""",
            """\
def is_valid_ipv4(s: str) -> bool:
    parts = s.split(".")
    if len(parts) != 4:
        return False
    for part in parts:
        if not (part.isascii() and part.isdigit()):
            return False
        if str(int(part)) != part or int(part) > 255:
            return False
    return True
""",
        ),
        wrong=(
            # Accepts leading zeros.
            """\
def is_valid_ipv4(s: str) -> bool:
    parts = s.split(".")
    return len(parts) == 4 and all(
        p.isascii() and p.isdigit() and int(p) <= 255 for p in parts
    )
""",
        ),
    ),
)
